"""Gradient compression for allreduce, as horovod.torch.compression: compress() returns the
tensor to send and a context; decompress(tensor, ctx) restores the original dtype."""

import torch


class Compressor:
    """Interface: a pair of static functions."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
