"""A handler whose model-config.yaml check fails at initialize: an expected error."""

from ts.handler_utils.distributed.config import ModelConfigError


class BadConfigHandler:
    def initialize(self, context):
        raise ModelConfigError("handler.max_batch_size must be a positive integer, got -1; fix model-config.yaml")

    def handle(self, data, context):
        return data
