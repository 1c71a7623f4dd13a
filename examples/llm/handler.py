"""The example's handler: tserve's built-in LLMHandler as it is.

A file of its own because the archiver takes a handler file or one of TorchServe's built-in
names; a subclass is where a custom model would change loading or request parsing.
"""

from ts.torch_handler.llm_handler import LLMHandler


class TinyLLMHandler(LLMHandler):
    pass
