"""Gradient compression for allreduce, as horovod.tensorflow.compression: compress() returns the
tensor to send and a context; decompress(tensor, ctx) restores the original dtype."""

import tensorflow as tf

from hoop._compression import Compressor, HalfCompressor, NoneCompressor  # noqa: F401


class FP16Compressor(HalfCompressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire."""

    @staticmethod
    def wider_float(tensor):
        return tensor.dtype.is_floating and tensor.dtype != tf.float16

    @staticmethod
    def cast(tensor, dtype):
        return tf.cast(tensor, dtype or tf.float16)


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
