"""A step's sampling, over the whole batch's logits at once: the logits processors (penalties,
``logit_bias``, ``min_tokens``), then greedy or filtered sampling, and the log-probabilities.

Every processor is a few tensor ops over the rows that use it (no per-row Python loop over the
vocabulary); the only per-row work is the draw itself, which must use each sequence's own
generator (a seeded request gives the same tokens whatever runs beside it). Log-probabilities
are those of the model's raw logits (``log_softmax`` before penalties and temperature, as vLLM
reports them by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ts.llm.engine.grammar import Grammars, apply_masks
from ts.llm.params import TokenLogprob

if TYPE_CHECKING:
    from ts.llm.engine.sequence import Sequence


# temperatures and repetition penalties act within this range (the greedy ones, below vLLM's
# epsilon, never divide: SamplingParams.greedy); beyond it float32 logits overflow to inf and NaN
FACTOR_RANGE = (1e-5, 1e6)


@dataclass
class Sampled:
    """One step's choice for each row: its token and, when its request asked, its logprobs."""

    tokens: list[int]
    logprobs: list[TokenLogprob | None]


def _padded(rows: list[list[int]], device: torch.device) -> torch.Tensor:
    """Lists of token ids as one ``(rows, longest)`` tensor, padded with -1."""
    width = max((len(r) for r in rows), default=0) or 1
    return torch.tensor([r + [-1] * (width - len(r)) for r in rows], dtype=torch.long, device=device)


def _counts(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """How often each token occurs in each row of ``ids`` (-1 is padding): ``(rows, vocab)``."""
    counts = torch.zeros(ids.shape[0], vocab + 1, device=ids.device)
    counts.scatter_add_(1, torch.where(ids < 0, vocab, ids), torch.ones_like(ids, dtype=counts.dtype))
    return counts[:, :vocab]


def apply_penalties(logits: torch.Tensor, seqs: list[Sequence]) -> None:
    """Repetition (prompt and output tokens), then frequency and presence (output tokens) penalties,
    in place, on the rows that set any (vLLM's order and formulas)."""
    rows = [i for i, s in enumerate(seqs) if s.params.penalised]
    if not rows:
        return
    dev, vocab = logits.device, logits.shape[-1]
    picked = [seqs[i] for i in rows]
    index = torch.tensor(rows, device=dev)
    sub = logits.index_select(0, index)
    out_counts = _counts(_padded([s.output_ids for s in picked], dev), vocab)
    # a penalty past FACTOR_RANGE acts as its bound: a float32 inf or 0 would turn the row into NaN
    rep = torch.tensor([float(s.params.repetition_penalty) for s in picked], device=dev).clamp(*FACTOR_RANGE)
    rep = rep.unsqueeze(1)
    seen = (out_counts > 0) | (_counts(_padded([s.prompt_ids for s in picked], dev), vocab) > 0)
    penalised = torch.where(sub > 0, sub / rep, sub * rep)
    sub = torch.where(seen, penalised, sub)
    freq = torch.tensor([s.params.frequency_penalty for s in picked], device=dev).unsqueeze(1)
    pres = torch.tensor([s.params.presence_penalty for s in picked], device=dev).unsqueeze(1)
    sub = sub - freq * out_counts - pres * (out_counts > 0).to(sub.dtype)
    logits.index_copy_(0, index, sub)


def apply_bias_and_bans(logits: torch.Tensor, seqs: list[Sequence], eos_token_ids: set[int]) -> None:
    """``logit_bias`` added, and EOS and ``stop_token_ids`` masked while a sequence has fewer than
    ``min_tokens`` output tokens: one scatter each over the whole batch."""
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    banned_rows: list[int] = []
    banned_cols: list[int] = []
    for i, seq in enumerate(seqs):  # gathers the few (row, token) pairs; the tensor work is batched
        p = seq.params
        for token, bias in p.logit_bias.items():
            rows.append(i)
            cols.append(token)
            values.append(bias)
        if len(seq.output_ids) < p.min_tokens:
            stops = (set() if p.ignore_eos else eos_token_ids) | set(p.stop_token_ids)
            banned_rows.extend([i] * len(stops))
            banned_cols.extend(stops)
    dev = logits.device
    if rows:
        logits.index_put_((torch.tensor(rows, device=dev), torch.tensor(cols, device=dev)),
                          torch.tensor(values, device=dev, dtype=logits.dtype), accumulate=True)
    if banned_rows:
        logits[torch.tensor(banned_rows, device=dev), torch.tensor(banned_cols, device=dev)] = float("-inf")


def filtered_probs(logits: torch.Tensor, seqs: list[Sequence]) -> torch.Tensor:
    """The sampling distribution of each row: temperature, then top-k, top-p and min-p, all rows
    together on one sort (a filter off for a row keeps every token)."""
    dev, vocab = logits.device, logits.shape[-1]
    temps = torch.tensor([float(s.params.temperature) for s in seqs], device=dev).clamp(*FACTOR_RANGE).unsqueeze(1)
    scaled = logits / temps
    ordered, order = torch.sort(scaled, dim=-1, descending=True)
    probs = torch.softmax(ordered, dim=-1)
    ranks = torch.arange(vocab, device=dev).unsqueeze(0)
    top_k = torch.tensor([min(s.params.top_k, vocab) or vocab for s in seqs], device=dev).unsqueeze(1)
    top_p = torch.tensor([s.params.top_p for s in seqs], device=dev).unsqueeze(1)
    min_p = torch.tensor([s.params.min_p for s in seqs], device=dev).unsqueeze(1)
    drop = (ranks >= top_k) | (probs.cumsum(dim=-1) - probs > top_p) | (probs < min_p * probs[:, :1])
    drop[:, 0] = False  # the most likely token always stays
    masked = torch.zeros_like(drop).scatter(1, order, drop)
    return torch.softmax(scaled.masked_fill(masked, float("-inf")), dim=-1)


def _logprobs(raw: torch.Tensor, tokens: torch.Tensor, seqs: list[Sequence]) -> list[TokenLogprob | None]:
    """The chosen tokens' log-probabilities (and the top k) for the rows that asked."""
    rows = [i for i, s in enumerate(seqs) if s.params.logprobs is not None]
    out: list[TokenLogprob | None] = [None] * len(seqs)
    if not rows:
        return out
    index = torch.tensor(rows, device=raw.device)
    lp = torch.log_softmax(raw.index_select(0, index).float(), dim=-1)
    chosen = lp.gather(1, tokens.index_select(0, index).unsqueeze(1)).squeeze(1).tolist()
    k = max(seqs[i].params.logprobs or 0 for i in rows)
    top_v, top_i = lp.topk(k, dim=-1) if k else (lp[:, :0], lp[:, :0].long())
    top_v_l, top_i_l = top_v.tolist(), top_i.tolist()
    for j, i in enumerate(rows):
        n = seqs[i].params.logprobs or 0
        out[i] = TokenLogprob(int(tokens[i]), chosen[j], list(zip(top_i_l[j][:n], top_v_l[j][:n], strict=True)))
    return out


def sample(logits: torch.Tensor, seqs: list[Sequence], eos_token_ids: set[int],
           grammars: Grammars | None = None) -> Sampled:
    """Row ``i`` of ``logits`` gives ``seqs[i]``'s next token: processed (penalties, bias, bans,
    grammar masks), then the argmax when greedy, else drawn from its filtered distribution with
    its own generator."""
    raw = logits
    if any(s.params.penalised or s.params.logit_bias or len(s.output_ids) < s.params.min_tokens
           or s.matcher is not None for s in seqs):
        logits = logits.clone()
        apply_penalties(logits, seqs)
        apply_bias_and_bans(logits, seqs, eos_token_ids)
        apply_masks(logits, seqs, grammars)
    tokens = logits.argmax(dim=-1)
    drawn = [i for i, s in enumerate(seqs) if not s.params.greedy]
    if drawn:
        probs = filtered_probs(logits.index_select(0, torch.tensor(drawn, device=logits.device)),
                               [seqs[i] for i in drawn])
        for j, i in enumerate(drawn):  # each sequence's own generator: one draw per row
            tokens[i] = torch.multinomial(probs[j], 1, generator=seqs[i].generator)[0]
    return Sampled(tokens.tolist(), _logprobs(raw, tokens, seqs))
