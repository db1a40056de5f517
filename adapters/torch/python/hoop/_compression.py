"""Gradient compression for allreduce, as Horovod's: compress() returns the tensor to send and a
context; decompress(tensor, ctx) restores the original dtype. The framework adapters' fp16
compressors say how their tensors are told apart and cast."""


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


class HalfCompressor(Compressor):
    """Sends floating-point tensors wider than float16 as float16, halving the bytes on the
    wire. A framework's subclass defines wider_float(tensor) and cast(tensor, dtype); the
    context is the original dtype, or None where nothing was cast."""

    @classmethod
    def compress(cls, tensor):
        if cls.wider_float(tensor):
            return cls.cast(tensor, None), tensor.dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else cls.cast(tensor, ctx)
