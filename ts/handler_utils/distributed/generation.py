"""Greedy generation over any ``forward(input_ids) -> logits`` callable.

Every rank runs the same loop on the same inputs, so the collectives inside ``forward``
line up. Sequences are right-padded; with a causal decoder the logits at a real position do
not depend on the padding after it, so no attention mask is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Forward = Callable[[torch.Tensor], torch.Tensor]


def right_pad(prompts: Sequence[Sequence[int]], length: int, pad_id: int) -> torch.Tensor:
    ids = torch.full((len(prompts), length), pad_id, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = torch.tensor(list(prompt), dtype=torch.long)
    return ids


@dataclass
class Generation:
    tokens: list[list[int]]  # the new tokens of each prompt
    first_logits: list[torch.Tensor]  # scores at each prompt's last position (float32, CPU)


@torch.inference_mode()
def greedy_generate(forward: Forward, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                    pad_id: int = 0, device: torch.device | None = None) -> Generation:
    """The ``max_new_tokens`` greedy continuations of each prompt."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    lengths = [len(p) for p in prompts]
    total = max(lengths) + max_new_tokens
    ids = right_pad(prompts, total, pad_id)
    if device is not None:
        ids = ids.to(device)
    out: list[list[int]] = [[] for _ in prompts]
    first: list[torch.Tensor] = []
    for step in range(max_new_tokens):
        width = max(lengths)
        logits = forward(ids[:, :width])
        if step == 0:
            first = [logits[row, n - 1].float().cpu().clone() for row, n in enumerate(lengths)]
        for row, n in enumerate(lengths):
            token = int(torch.argmax(logits[row, n - 1]).item())
            ids[row, n] = token
            out[row].append(token)
        lengths = [n + 1 for n in lengths]
    return Generation(out, first)
