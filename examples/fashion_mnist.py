"""Fashion-MNIST as numpy arrays, for the Python examples (torch_fashion_mnist.py,
jax_fashion_mnist.py, keras_fashion_mnist.py): the gzipped IDX files of Debian's
dataset-fashion-mnist, read from a folder, $HOOP_DATA_DIR or /usr/share/datasets/fashion-mnist."""

import argparse
import gzip
import os

import numpy as np

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
# The training set's mean and deviation of a pixel (of 0..1 values).
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    """An IDX file (gzipped) as a numpy array: magic 0x00000803 images, 0x00000801 labels."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split, data_dir=None):
    """(images float32 N x 28 x 28, normalized; labels uint8 N) of "train" or "t10k"."""
    data_dir = data_dir or os.environ.get("HOOP_DATA_DIR") or DEFAULT_DATA_DIR
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return (images.astype(np.float32) / 255.0 - MEAN) / STD, labels


def example_parser(description):
    """The options the JAX and Keras examples share: epochs, the batch per rank, Adam's rate
    (scaled by the ranks), a limit on the examples, the seed and the data folder."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank (default 64)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's, scaled by the ranks")
    parser.add_argument("--limit", type=int, default=0,
                        help="train on at most this many examples per epoch (0: all)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data-dir", default=None,
                        help="the dataset's folder (default $HOOP_DATA_DIR, else "
                             f"{DEFAULT_DATA_DIR})")
    return parser
