"""The generation engine across pipeline-parallel ranks (``parallelType: pp``).

Every rank of the torchrun job holds one stage: a contiguous run of the decoder layers (rank 0
the first, the last rank the last), and only those layers' weights and KV cache rows. Rank 0
also holds the token embeddings; the last rank the final norm and the LM head.

Every rank runs a ``GenerationEngine`` whose runner is a ``StageRunner``: the engine's own scheduling (joins, leaves,
cancels, chunked prefill, token budget), driven by rank 0's adds and cancels, which the
``RankCoordinator`` publishes before each step exactly as for tensor-parallel ranks. Given the
same commands and the same sampled tokens, every rank's schedule is the same, so each forward
of a step (the decode, each prefill) runs on every stage with the same rows and positions, and a
sequence joins and leaves every stage's KV cache at the same row. In each forward the hidden
states go stage to stage with point-to-point ``send``/``recv``; the last stage samples, and its
token ids (a few bytes) are broadcast to every rank, which all accept them the same way (stop
strings, EOS, lengths): that is what keeps the schedules identical.

One microbatch per forward: the stages of a step run one after another, each idle while the
others compute. Overlapping them (splitting the running batch into as many decode microbatches
as stages, each a step behind the one before) is the later optimisation.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ts.handler_utils.distributed.checkpoint import Checkpoint, find_checkpoint, load_parameters, meta_parameters
from ts.handler_utils.distributed.config import ModelConfigError
from ts.handler_utils.distributed.pipelining import stage_bounds
from ts.llm.engine.fastpath.llama import LlamaFastForward
from ts.llm.engine.generation import GenerationEngine
from ts.llm.engine.rectangle import RectangleKV
from ts.llm.engine.runner import SampleFn
from ts.llm.engine.sampling import Sampled
from ts.llm.engine.scheduler import KVFactory
from ts.llm.engine.sequence import Sequence
from ts.llm.params import TokenLogprob

logger = logging.getLogger(__name__)

# Architectures whose base model hands the token embeddings unchanged to a plain stack of decoder
# layers (.layers) and ends with .norm (read in their Transformers source): a stage can then run
# the base model's own forward on the hidden states it receives. Others (e.g. Granite, which scales
# the embeddings in the forward, so every stage would scale them again) are refused.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "gemma")


class PipelineStage:
    """This rank's part of the model and its links to the neighbouring stages."""

    def __init__(self, model: Any, rank: int, num_stages: int, device: torch.device | str,
                 checkpoint: Checkpoint | None = None, dtype: torch.dtype | None = None) -> None:
        """Keep this rank's part of ``model``; a model built with ``meta_parameters`` then reads
        just that part's weights from ``checkpoint``."""
        base, layers, norm = _parts(model)
        names: dict[int, list[str]] = {}  # the whole model's names: the checkpoint's
        for name, param in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(param), []).append(name)
        count = len(layers)
        if count < num_stages:
            raise ModelConfigError(
                f"cannot split {type(model).__name__}'s {count} decoder layers into {num_stages} pipeline "
                f"stages: every stage needs at least one layer; set parallelLevel to at most {count} "
                "(or use parallelType tp)")
        self.rank, self.num_stages, self.device = rank, num_stages, device
        self.start, self.end = stage_bounds(count, num_stages)[rank]
        self.first, self.last = rank == 0, rank == num_stages - 1
        config = model.config.get_text_config(decoder=True)
        self.hidden_size = int(config.hidden_size)
        own = list(layers)[self.start:self.end]
        for local, layer in enumerate(own):  # the stage's KV cache holds its own layers only
            for module in layer.modules():
                if hasattr(module, "layer_idx"):
                    setattr(module, "layer_idx", local)  # noqa: B010 - nn.Module's typed __setattr__ refuses an int
        base.layers = nn.ModuleList(own)
        config.num_hidden_layers = len(own)
        if isinstance(getattr(config, "layer_types", None), list):
            config.layer_types = config.layer_types[self.start:self.end]
        self.embed = base.get_input_embeddings() if self.first else None
        if not self.first:
            base.set_input_embeddings(None)
        if not self.last:  # the final norm and the head belong to the last stage
            base.norm = nn.Identity()
            model.lm_head = None
        self.lm_head = model.get_output_embeddings() if self.last else None
        del layers, norm
        gc.collect()
        if checkpoint is not None:
            load_parameters(model, checkpoint, names, dtype)
        self.model = model.to(device)
        self.base = base
        self.dtype = next(base.layers.parameters()).dtype

    def describe(self) -> str:
        return f"stage {self.rank + 1}/{self.num_stages} (decoder layers {self.start}-{self.end - 1})"

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                attention_mask: torch.Tensor | None, last: list[int] | None, cache_kw: str) -> torch.Tensor | None:
        """Run this stage; the last stage returns the logits ``(rows, vocab)`` at each row's
        position ``last[row]`` (default: the last one), the others ``None``."""
        if self.first:
            assert self.embed is not None
            hidden = self.embed(input_ids)
        else:  # every rank knows the shape: the same schedule built the same input_ids
            hidden = torch.empty(*input_ids.shape, self.hidden_size, dtype=self.dtype, device=self.device)
            with self._link(f"receiving hidden states from rank {self.rank - 1}"):
                dist.recv(hidden, src=self.rank - 1)
        out = self.base(inputs_embeds=hidden, position_ids=position_ids, attention_mask=attention_mask,
                        use_cache=True, **{cache_kw: cache})
        hidden = out.last_hidden_state
        if not self.last:
            with self._link(f"sending hidden states to rank {self.rank + 1}"):
                dist.send(hidden.contiguous(), dst=self.rank + 1)
            return None
        if last is None:
            picked = hidden[:, -1]
        else:
            picked = hidden[torch.arange(len(last), device=self.device), torch.tensor(last, device=self.device)]
        assert self.lm_head is not None
        logits: torch.Tensor = self.lm_head(picked)
        return logits.float()

    def share_tokens(self, tokens: list[int] | None, count: int) -> list[int]:
        """The last stage's sampled token ids, on every rank."""
        buf = (torch.tensor(tokens, dtype=torch.long, device=self.device) if tokens is not None
               else torch.empty(count, dtype=torch.long, device=self.device))
        with self._link(f"sharing the tokens sampled on rank {self.num_stages - 1}"):
            dist.broadcast(buf, src=self.num_stages - 1)
        return buf.tolist()

    def share_sampled(self, sampled: Sampled | None, seqs: list[Sequence]) -> Sampled:
        """The last stage's sampled tokens and, when a sequence asked, their logprobs (every rank
        knows who asked: the same requests were added on each), on every rank."""
        tokens = self.share_tokens(None if sampled is None else sampled.tokens, len(seqs))
        asked = [s.params.logprobs for s in seqs]
        if all(k is None for k in asked):
            return Sampled(tokens, [None] * len(seqs))
        k = max(a or 0 for a in asked)
        buf = torch.zeros(len(seqs), 1 + 2 * k, dtype=torch.float64, device=self.device)
        if sampled is not None:  # [logprob, top ids..., top logprobs...] per row
            for i, lp in enumerate(sampled.logprobs):
                if lp is not None:
                    buf[i, 0] = lp.logprob
                    buf[i, 1:1 + len(lp.top)] = torch.tensor([t for t, _ in lp.top], dtype=torch.float64)
                    buf[i, 1 + k:1 + k + len(lp.top)] = torch.tensor([v for _, v in lp.top], dtype=torch.float64)
        with self._link(f"sharing the logprobs computed on rank {self.num_stages - 1}"):
            dist.broadcast(buf, src=self.num_stages - 1)
        rows = buf.tolist()
        return Sampled(tokens, [None if n is None else TokenLogprob(
            tokens[i], rows[i][0], [(int(rows[i][1 + j]), rows[i][1 + k + j]) for j in range(n)])
            for i, n in enumerate(asked)])

    @contextlib.contextmanager
    def _link(self, what: str) -> Iterator[None]:
        """Name the step a lost peer broke (gloo and NCCL only say which socket failed)."""
        try:
            yield
        except RuntimeError as exc:
            raise RuntimeError(f"the pipeline broke while rank {self.rank} was {what} (a rank died or stopped "
                               f"answering): {exc}") from exc


def _parts(model: Any) -> tuple[Any, nn.ModuleList, nn.Module]:
    """The base model (a Transformers model, untyped), its decoder layers and its final norm; a
    clear error for other shapes."""
    base = getattr(model, "base_model", None)
    layers = getattr(base, "layers", None)
    norm = getattr(base, "norm", None)
    has_io = (base is not None and callable(getattr(base, "get_input_embeddings", None))
              and callable(getattr(model, "get_output_embeddings", None))
              and model.get_output_embeddings() is not None and base is not model)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if not (model_type in SUPPORTED_MODEL_TYPES and isinstance(layers, nn.ModuleList)
            and isinstance(norm, nn.Module) and has_io):
        raise ModelConfigError(
            f"llm_handler cannot split {type(model).__name__} (model_type {model_type}) into pipeline stages: it "
            f"splits the decoder layers of {', '.join(SUPPORTED_MODEL_TYPES)} models; serve this model with "
            "parallelType tp or on one rank")
    return base, layers, norm


class StageRunner:
    """The engine's runner on one pipeline stage (``runner.py``): its forward runs this rank's
    layers and its sampled tokens come from the last stage (see the module docstring). It
    serves either KV cache: every stage's paged pool holds the same block ids for its own
    layers only, and the same commands and sampled tokens give every stage the same block
    tables, preemptions and prefix hits, so no block id ever crosses a link."""

    def __init__(self, stage: PipelineStage) -> None:
        self.stage = stage
        self.model = stage.model
        # a stage holds part of the model: the fast forward (ts/llm/engine/fastpath) runs whole models only
        self.fast_forward: LlamaFastForward | None = None
        self.forward_path = "Hugging Face's forward (fast_path: false)"
        self.device = torch.device(stage.device)
        params = inspect.signature(stage.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                attention_mask: torch.Tensor | None, last: list[int] | None = None) -> torch.Tensor | None:
        return self.stage.forward(input_ids, position_ids, cache, attention_mask, last, self._cache_kw)

    def sample(self, logits: torch.Tensor | None, seqs: list[Sequence], sample: SampleFn) -> Sampled:
        sampled = sample(logits, seqs) if self.stage.last and logits is not None else None
        return self.stage.share_sampled(sampled, seqs)


def stage_engine(stage: PipelineStage, tokenizer: Any, kv_cache: KVFactory = RectangleKV,
                 **limits: Any) -> GenerationEngine:
    """The engine on one pipeline stage, over the rectangle cache or (``paged.scheduler.PagedKV``)
    the paged one."""
    return GenerationEngine(stage.model, tokenizer, **limits, fast_path=False, runner=StageRunner(stage),
                            kv_cache=kv_cache)


def load_stage(path: str, dtype: Any, trust_remote_code: bool, rank: int, num_stages: int,
               device: torch.device) -> PipelineStage:
    """Build the model without weights, keep this rank's stage and read only its weights from
    the checkpoint (no rank ever holds the whole model, in host memory or on a device)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    if dtype == "auto":  # the checkpoint's own
        dtype = getattr(config, "dtype", None) or torch.float32
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    checkpoint = find_checkpoint(Path(path))
    with meta_parameters():
        model = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]  # transformers' stub is untyped
            config, dtype=dtype, trust_remote_code=trust_remote_code)
    model.eval()
    return PipelineStage(model, rank, num_stages, device, checkpoint=checkpoint, dtype=dtype)
