"""Bag-of-embeddings sentiment model (3 classes) for the preprocess-pool text example."""

import torch
from torch import nn


class BagClassifier(nn.Module):
    def __init__(self, vocab_size: int = 64, dim: int = 16, num_classes: int = 3) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(tokens, offsets))
