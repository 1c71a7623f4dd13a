"""densenet_handler: kept for TorchServe archives that name it; same as image_classifier."""

from ts.torch_handler.image_classifier import ImageClassifier


class DenseNetHandler(ImageClassifier):
    pass
