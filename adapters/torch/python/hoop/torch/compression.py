"""Gradient compression for allreduce, as horovod.torch.compression: compress() returns the
tensor to send and a context; decompress(tensor, ctx) restores the original dtype."""

import torch

from hoop._compression import Compressor, HalfCompressor, NoneCompressor  # noqa: F401


class FP16Compressor(HalfCompressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire."""

    @staticmethod
    def wider_float(tensor):
        """Whether `tensor` is floating-point and not float16 already: what compress() casts."""
        return tensor.dtype.is_floating_point and tensor.dtype != torch.float16

    @staticmethod
    def cast(tensor, dtype):
        """`tensor` cast to `dtype`, or to float16 when dtype is None."""
        return tensor.type(dtype or torch.float16)


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    ## Sends tensors as they are.
    none = NoneCompressor
    ## Sends floating-point tensors as float16.
    fp16 = FP16Compressor
