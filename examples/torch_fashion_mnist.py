"""Fashion-MNIST with hoop.torch, written as a horovod.torch script would be.

    hooprun -np 2 /usr/bin/python3 examples/torch_fashion_mnist.py --epochs 1

(PYTHONPATH=build/python). Each rank trains on its shard of the training set (every
size-th example from its rank on, reshuffled each epoch), the learning rate is scaled by the
number of ranks, rank 0's initial model and optimizer state are broadcast, and
DistributedOptimizer averages the gradients. Rank 0 prints the loss, test accuracy and
throughput of each epoch.

The data are the gzipped IDX files of Fashion-MNIST, read from $HOOP_DATA_DIR or
/usr/share/datasets/fashion-mnist.
"""

import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import fashion_mnist  # examples/fashion_mnist.py, beside this script
import hoop.torch as hvd


class Net(nn.Module):
    """Two 3x3 convolutions with pooling, then two dense layers: 28x28 -> 10 classes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3)
        self.fc1 = nn.Linear(32 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class WideMLP(nn.Module):
    """784 -> 2048 -> 2048 -> 2048 -> 10 with ReLUs: 10.0 M parameters (38 MiB of f32
    gradients a step, 240 times the CNN's), where exchanging gradients costs as much as
    computing them."""

    def __init__(self, width=2048):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, width), nn.ReLU(),
                                    nn.Linear(width, width), nn.ReLU(),
                                    nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))

    def forward(self, x):
        return self.layers(x)


def mlp():
    """The training core's MLP (784-256-128-10), which the elastic tests train."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                         nn.ReLU(), nn.Linear(128, 10))


MODELS = {"cnn": Net, "mlp": mlp, "wide-mlp": WideMLP}


def load_fashion_mnist(split, data_dir=None):
    """(images float32 N x 1 x 28 x 28 normalized, labels int64 N) of "train" or "t10k"."""
    images, labels = fashion_mnist.load(split, data_dir)
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def shard(n, epoch, seed):
    """This rank's indices of a dataset of n examples: one permutation shared by all ranks
    (like DistributedSampler), every size-th element from this rank, equal counts."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
    per_rank = n // hvd.size()
    return order[hvd.rank():per_rank * hvd.size():hvd.size()]


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(float(value)), name=name).item()


def evaluate(model, x, y):
    model.eval()
    mine = torch.arange(hvd.rank(), len(y), hvd.size())
    with torch.no_grad():
        correct = (model(x[mine]).argmax(1) == y[mine]).sum().item()
    model.train()
    return metric_average(correct / len(mine), "test_accuracy")


def arg_parser(description):
    """The options of this example, which torch_elastic_fashion_mnist.py extends."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--model", choices=sorted(MODELS), default="cnn")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.01, help="per rank; scaled by the size")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--data-dir", default=None)
    return p


def parse_args(argv=None):
    return arg_parser(__doc__.splitlines()[0]).parse_args(argv)


def train(args):
    """Trains on this rank's shard (hoop.torch started, then shut down); every rank returns
    the same per-epoch metrics: loss and test accuracy averaged over the ranks, and this
    rank's view of the job's samples/s."""
    hvd.init()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_x, train_y = load_fashion_mnist("train", args.data_dir)
    test_x, test_y = load_fashion_mnist("t10k", args.data_dir)

    model = MODELS[args.model]()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    epochs = []
    for epoch in range(1, args.epochs + 1):
        indices = shard(len(train_y), epoch, args.seed)
        steps = len(indices) // args.batch_size
        if args.max_steps:
            steps = min(steps, args.max_steps)
        start, loss_sum = time.perf_counter(), 0.0
        for step in range(steps):
            batch = indices[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(train_x[batch]), train_y[batch])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
        elapsed = time.perf_counter() - start
        loss = metric_average(loss_sum / max(steps, 1), "train_loss")
        accuracy = evaluate(model, test_x, test_y)
        epochs.append({"epoch": epoch, "loss": loss, "accuracy": accuracy,
                       "samples_per_s": steps * args.batch_size * hvd.size() / elapsed})
        if hvd.rank() == 0 and getattr(args, "print_epochs", True):
            print(epoch_line(epochs[-1]), flush=True)
    hvd.shutdown()
    return epochs


def epoch_line(m):
    """One epoch's metrics as the example prints them."""
    return (f"epoch {m['epoch']}: loss {m['loss']:.4f}  test accuracy {100 * m['accuracy']:.2f} %"
            f"  {m['samples_per_s']:.0f} samples/s")


def main():
    train(parse_args())


if __name__ == "__main__":
    main()
