"""Gradient compression for the wire (horovod/torch/compression.py)."""

import torch


class Compressor:
    """Turns a tensor into what is sent, and the received tensor back: the
    interface (Horovod's) that NoneCompressor, FP16Compressor and users'
    own compressors implement."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context for decompress)."""
        raise NotImplementedError('a Compressor subclass implements compress()')

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError('a Compressor subclass implements decompress()')


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16; other dtypes unchanged."""

    @staticmethod
    def compress(tensor):
        compressed = tensor
        if tensor.dtype.is_floating_point:
            compressed = tensor.type(torch.float16)
        return compressed, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """The compressors a DistributedOptimizer or allreduce accepts."""
    none = NoneCompressor
    fp16 = FP16Compressor
