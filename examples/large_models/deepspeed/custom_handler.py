"""Tiny Llama, DeepSpeed tensor parallel over 2 ranks: only request handling is written here."""

from byte_lm import ByteLMMixin

from ts.torch_handler.distributed.base_deepspeed_handler import BaseDeepSpeedHandler


class TinyLlamaDeepSpeedHandler(ByteLMMixin, BaseDeepSpeedHandler):
    pass
