"""Tiny Llama, tensor parallel (DTensor) over 2 ranks: only request handling is written here."""

from byte_lm import ByteLMMixin

from ts.torch_handler.distributed.base_tp_handler import BaseTPHandler


class TinyLlamaTPHandler(ByteLMMixin, BaseTPHandler):
    pass
