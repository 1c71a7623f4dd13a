"""Tiny Llama, pipeline parallel over 2 ranks: only request handling is written here."""

from byte_lm import ByteLMMixin

from ts.torch_handler.distributed.base_pippy_handler import BasePippyHandler


class TinyLlamaPipelineHandler(ByteLMMixin, BasePippyHandler):
    pass
