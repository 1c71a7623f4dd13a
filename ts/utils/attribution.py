"""Integrated gradients (what TorchServe gets from Captum), in plain torch."""

from __future__ import annotations

from typing import Any

import torch


def integrated_gradients(model: Any, inputs: torch.Tensor, target: int = 0, n_steps: int = 15,
                         baseline: torch.Tensor | None = None) -> torch.Tensor:
    """Riemann (midpoint) approximation of the path integral of gradients from baseline to input."""
    if baseline is None:
        baseline = torch.zeros_like(inputs)
    total = torch.zeros_like(inputs)
    with torch.enable_grad():
        for step in range(n_steps):
            alpha = (step + 0.5) / n_steps
            x = (baseline + alpha * (inputs - baseline)).detach().requires_grad_(True)
            out = model(x)
            if isinstance(out, dict):
                out = out.get("out", next(iter(out.values())))
            selected = out.reshape(out.shape[0], -1)[:, int(target)].sum()
            (grad,) = torch.autograd.grad(selected, x)
            total += grad
    return (inputs - baseline) * total / n_steps


class EmbeddedHead(torch.nn.Module):
    """model.fc(mean(embeddings)) so that gradients can flow from pre-computed embeddings."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, emb: torch.Tensor) -> torch.Tensor:
        pooled = emb.mean(dim=1)
        fc = getattr(self.model, "fc", None)
        logits: torch.Tensor = fc(pooled) if callable(fc) else pooled
        return logits
