"""Tiny Llama with Accelerate big-model inference (one process, CPU + disk offload)."""

from byte_lm import ByteLMMixin

from ts.torch_handler.distributed.base_accelerate_handler import BaseAccelerateHandler


class TinyLlamaAccelerateHandler(ByteLMMixin, BaseAccelerateHandler):
    pass
