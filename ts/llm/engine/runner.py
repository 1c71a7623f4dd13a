"""The engine's runner: what runs a step's forward and turns its logits into tokens.

A KV-cache scheduler (``rectangle.py``, ``paged/scheduler.py``) decides which tokens a step
computes and where their keys and values live; the runner computes them. ``ModelRunner`` runs
the whole model in this process (the engine's fast forward, ``fastpath/``, or Hugging Face's);
``pipeline_parallel.StageRunner`` runs one pipeline stage and gets the sampled tokens from the
last stage. Either works under either cache: that is the composition that replaces a subclass
per (cache, runner) pair.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ts.llm.engine.fastpath import choose_forward
from ts.llm.engine.fastpath.llama import LlamaFastForward
from ts.llm.engine.sampling import Sampled
from ts.llm.engine.sequence import Sequence

# the step's sampling over its rows (``Sampler`` in generation.py: penalties, masks, the draw)
SampleFn = Callable[[torch.Tensor, list[Sequence]], Sampled]


class Runner(Protocol):
    """Runs forwards and sampling for a KV-cache scheduler."""

    model: Any
    device: torch.device
    # the one forward of a mixed step (decode rows and prompt tokens together); None: the
    # scheduler runs the decode forward, then the prefill's, through ``forward``
    fast_forward: LlamaFastForward | None
    forward_path: str

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                attention_mask: torch.Tensor | None, last: list[int] | None = None) -> torch.Tensor | None:
        """Logits ``(rows, vocab)`` of each row's position ``last[row]`` (default: the last one);
        None where this process computes no logits (a pipeline stage before the last)."""
        ...

    def sample(self, logits: torch.Tensor | None, seqs: list[Sequence], sample: SampleFn) -> Sampled:
        """Each row's next token (and logprobs when asked), the same on every process."""
        ...


class ModelRunner:
    """The whole model in this process: the fast forward where it runs the model, else Hugging
    Face's forward with the model's own cache argument."""

    def __init__(self, model: Any, fast_path: bool | None) -> None:
        self.model = model
        self.device: torch.device = next(model.parameters()).device
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in params
        self.fast_forward, self.forward_path = choose_forward(model, fast_path)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                attention_mask: torch.Tensor | None, last: list[int] | None = None) -> torch.Tensor:
        if self.fast_forward is not None:
            return self.fast_forward(input_ids, position_ids, cache, last)
        kwargs: dict[str, Any] = {self.cache_kw: cache, "use_cache": True}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = (1 if last is None else
                                        torch.tensor([[i] for i in last], device=self.device))
        out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, **kwargs)
        logits: torch.Tensor = out.logits
        if last is None or self._logits_to_keep:
            return logits[:, -1, :].float()
        return logits[torch.arange(len(last), device=self.device), torch.tensor(last, device=self.device)].float()

    def sample(self, logits: torch.Tensor | None, seqs: list[Sequence], sample: SampleFn) -> Sampled:
        assert logits is not None  # the whole model always gives logits
        return sample(logits, seqs)
