"""preprocess reads self.vocab, which only initialize() creates: refused when pooled."""

from ts.torch_handler.base_handler import BaseHandler


class NeedsInit(BaseHandler):
    def initialize(self, context):
        self.setup_common(context)
        self.vocab = {"a": 1}
        self.initialized = True

    def preprocess(self, data):
        return [self.vocab.get(str(row.get("body")), 0) for row in data]

    def inference(self, data):
        return data

    def postprocess(self, data):
        return data
