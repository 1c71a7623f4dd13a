"""Class handler that overrides handle() (refused with preprocessWorkers > 0)."""

from ts.torch_handler.base_handler import BaseHandler


class CustomHandle(BaseHandler):
    def initialize(self, context):
        self.initialized = True

    def handle(self, data, context):
        return data
