"""preprocess reads self.tokenizer, which only initialize() creates."""

from ts.torch_handler.base_handler import BaseHandler


class NeedsInit(BaseHandler):
    def initialize(self, context):
        self.setup_common(context)
        self.tokenizer = str.split
        self.initialized = True

    def preprocess(self, data):
        return [self.tokenizer(row["body"]) for row in data]

    def inference(self, data):
        return data

    def postprocess(self, data):
        return data
