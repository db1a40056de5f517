"""Gradient compression for allreduce, as horovod.torch.compression: compress() returns the
tensor to send and a context; decompress(tensor, ctx) restores the original dtype."""

import torch

from hoop._compression import Compressor, HalfCompressor, NoneCompressor  # noqa: F401


class FP16Compressor(HalfCompressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire."""

    @staticmethod
    def wider_float(tensor):
        return tensor.dtype.is_floating_point and tensor.dtype != torch.float16

    @staticmethod
    def cast(tensor, dtype):
        return tensor.type(dtype or torch.float16)


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
