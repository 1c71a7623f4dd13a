"""The engine's own forward for Llama-family decoders (Llama, Mistral, Qwen2): same weights, less
framework.

On a small model a Hugging Face forward step costs mostly per-op Python and framework work (module
calls, mask construction, cache objects, the rotary embedding recomputed per step, lm_head over
every position), not arithmetic. This forward runs the same arithmetic in the same order with:

* the q/k/v projections in one matmul and gate/up in another: the weights are concatenated once at
  load and the model's own parameters are re-pointed at views of the concatenation, so nothing is
  stored twice and the Hugging Face forward (and ``generate``) still works on the same tensors;
* cos/sin tables for every position computed once with the model's own rotary module (so rope
  scaling is honoured) and indexed by each row's positions;
* several token groups in one forward (``parts.py``): the running batch's decode tokens and new
  prompts' tokens go through the linear layers together as one packed row (the weights are read
  once per step, not once per group), and each group attends on its own: decode rows against
  their ``BatchCache`` row (the new key/value written in place at the row's own column), a chunk
  of a long prompt after its earlier chunks, whole prompts packed without padding, each masked to
  its own earlier tokens;
* the final norm and lm_head only on the rows' sampled positions.

The model's results are unchanged up to float rounding of the fused matmuls; the engine's tests
check greedy tokens against ``generate``.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from ts.llm.engine.fastpath.parts import DecodeRows, PackedPrompts, Part, PromptChunk
from ts.llm.engine.fastpath.prepack import PackedLinear
from ts.llm.engine.kvcache import BatchCache

# architectures whose decoder layers have this exact shape (q/k/v/o, gate/up/down, two RMSNorms)
SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
# rope types whose tables depend on the position only (dynamic ones rescale with the length)
STATIC_ROPE = ("default", "linear", "llama3")


# what each decoder layer must hold for the fast forward to stand in for its forward
LAYER_PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm.variance_epsilon",
               "post_attention_layernorm.variance_epsilon")
EXTRA_PARTS = ("self_attn.q_norm", "self_attn.k_norm")  # (Qwen3-style) not computed here


def _has(obj: Any, dotted: str) -> bool:
    for name in dotted.split("."):
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def unsupported_reason(model: Any) -> str | None:
    """Why the fast forward cannot run this model exactly, or None when it can."""
    name = type(model).__name__
    if name not in SUPPORTED or not type(model).__module__.startswith("transformers.models."):
        return f"{name} ({type(model).__module__}) is not one of transformers' {', '.join(SUPPORTED)}"
    config = model.config
    inner = model.model
    rope_type = getattr(inner.rotary_emb, "rope_type", "default")
    if rope_type not in STATIC_ROPE:
        return f"rope_type {rope_type!r} rescales with the sequence length"
    if any(t != "full_attention" for t in (getattr(config, "layer_types", None) or [])):
        return "it has sliding-window layers"
    if getattr(config, "sliding_window", None) and name == "MistralForCausalLM":
        return "it uses sliding-window attention"
    for p in model.parameters():
        if getattr(p, "device_mesh", None) is not None:
            return "its weights are sharded (tensor parallel)"
        if p.device.type == "meta":
            return "some of its weights are offloaded (meta tensors)"
    for i, layer in enumerate(inner.layers):
        missing = [part for part in LAYER_PARTS if not _has(layer, part)]
        extra = [part for part in EXTRA_PARTS if _has(layer, part)]
        if missing or extra:
            return f"decoder layer {i} is not the plain Llama layout ({', '.join(missing + extra)})"
    if getattr(config, "hidden_act", None) not in ("silu", "gelu", "gelu_pytorch_tanh", "relu"):
        return f"hidden_act {getattr(config, 'hidden_act', None)!r}"
    return None


def _fuse(linears: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight (and bias) for several linears on the same input; each linear's parameters
    become views of it, so the memory is not doubled."""
    weight = torch.cat([lin.weight.data for lin in linears])
    biases = [lin.bias for lin in linears]
    bias = None
    if any(b is not None for b in biases):
        bias = torch.cat([b.data if b is not None else weight.new_zeros(lin.out_features)
                          for b, lin in zip(biases, linears, strict=True)])
    start = 0
    for lin in linears:
        end = start + lin.out_features
        lin.weight.data = weight[start:end]
        if lin.bias is not None and bias is not None:
            lin.bias.data = bias[start:end]
        start = end
    return weight, bias


class _Layer:
    __slots__ = ("qkv_w", "qkv_b", "o_w", "o_b", "gate_up_w", "gate_up_b", "down_w", "down_b",
                 "ln1", "ln2", "eps1", "eps2", "qkv", "o", "gate_up", "down")

    def __init__(self, layer: Any) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        self.qkv_w, self.qkv_b = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
        self.o_w, self.o_b = attn.o_proj.weight, attn.o_proj.bias
        self.gate_up_w, self.gate_up_b = _fuse([mlp.gate_proj, mlp.up_proj])
        self.down_w, self.down_b = mlp.down_proj.weight, mlp.down_proj.bias
        self.ln1, self.eps1 = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.ln2, self.eps2 = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon
        # the weights as the CPU's GEMM wants them, prepared once (prepack.py)
        self.qkv, self.o = PackedLinear(self.qkv_w, self.qkv_b), PackedLinear(self.o_w, self.o_b)
        self.gate_up, self.down = PackedLinear(self.gate_up_w, self.gate_up_b), PackedLinear(self.down_w, self.down_b)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face's Llama RMSNorm (float32 statistics, weight after the cast back). In float32
    torch's own ``rms_norm`` gives the same bits in one call instead of six ops."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` as Hugging Face computes it: ``rotate_half(x)`` is
    ``cat(-x2, x1)``; here the sign sits in the table instead (``-x2 * s == x2 * -s`` exactly)."""
    return x * cos + torch.roll(x, x.shape[-1] // 2, dims=-1) * sin_signed


class LlamaFastForward:
    """``(input_ids, positions, cache, last) -> logits (rows, vocab)``, the engine's ``_forward``
    contract, for the models ``unsupported_reason`` accepts."""

    def __init__(self, model: Any) -> None:
        from transformers.activations import ACT2FN, SiLUActivation

        config = model.config
        inner = model.model
        attn = inner.layers[0].self_attn
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = attn.head_dim
        self.scale = attn.scaling
        self.groups = self.heads // self.kv_heads
        self.q_size = self.heads * self.head_dim
        self.kv_size = self.kv_heads * self.head_dim
        act = ACT2FN[config.hidden_act]
        # SiLU's module only calls F.silu: the module call cost more than the op on a step's rows
        self.act = F.silu if type(act) is SiLUActivation else act
        self.embed = inner.embed_tokens.weight
        self.layers = [_Layer(layer) for layer in inner.layers]
        self.norm, self.norm_eps = inner.norm.weight, inner.norm.variance_epsilon
        self.lm_head_w = model.lm_head.weight
        self.lm_head_b = getattr(model.lm_head, "bias", None)
        self.lm_head = PackedLinear(self.lm_head_w, self.lm_head_b)
        self.linear_form = self.layers[0].qkv.how if self.layers else "F.linear"  # for the worker's log
        self.intermediate = self.layers[0].gate_up_w.shape[0] // 2
        with torch.inference_mode():  # the model's own rotary module: its scaling and dtype
            positions = torch.arange(config.max_position_embeddings, device=self.embed.device).unsqueeze(0)
            cos, sin = inner.rotary_emb(self.embed[:1].unsqueeze(0), position_ids=positions)
        half = self.head_dim // 2
        # (max_positions, head_dim); the sine's first half negated for _rotate
        self.cos, self.sin = cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1)
        self.rest_s = 0.0  # the last forward's measured time of its parts after the first (forward)

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any,
                 last: list[int] | None = None) -> torch.Tensor:
        """One layout at a time (the bare-loop bound and the tests): a decode step over a
        ``BatchCache``, right-padded whole prompts with ``last[row]`` their last index into a new
        cache, or one row of prompt tokens after those already in ``cache`` (the logits of
        ``last[0]``, default the last)."""
        rows = input_ids.shape[0]
        if isinstance(cache, BatchCache):
            return self.forward([DecodeRows(input_ids[:, 0], cache)])
        if rows > 1 and cache.get_seq_length() == 0 and last is not None:
            prompts = [row[:n + 1] for row, n in zip(input_ids.tolist(), last, strict=True)]
            return self.forward([PackedPrompts(prompts, cache, input_ids.device)])
        if rows != 1:
            raise ValueError("prompt tokens after cached ones come one sequence at a time")
        part = PromptChunk(input_ids[0], int(positions[0, 0]), cache)
        if last is not None:
            part.sampled = torch.tensor(last, device=input_ids.device)
        return self.forward([part])

    def forward(self, parts: list[Part]) -> torch.Tensor:
        """The parts' tokens through the model in one pass (``parts.py``): the logits ``(rows,
        vocab)`` of each part's sampled tokens, part after part.

        With several parts, the first part's rows (the engine's decode rows) and the other
        parts' rows (the step's prompt tokens) run each linear layer as one matmul; the other
        parts' share of the step adds up in ``rest_s`` (seconds): their attention measured, and
        their rows' share of each matmul's time (everything else, norms, rotary and the first
        part's work, is left out of it)."""
        self.rest_s = 0.0
        ids = torch.cat([p.ids for p in parts]) if len(parts) > 1 else parts[0].ids
        positions = torch.cat([p.positions for p in parts]) if len(parts) > 1 else parts[0].positions
        bounds, start = [], 0
        for p in parts:
            bounds.append((start, start + p.ids.shape[0]))
            start += p.ids.shape[0]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if len(parts) == 1:
                return parts[0].attend(self, layer, q, k, v)
            outs = [parts[0].attend(self, layer, q[:, :, :bounds[0][1]], k[:, :, :bounds[0][1]],
                                    v[:, :, :bounds[0][1]])]
            started = time.perf_counter()
            for p, (a, b) in zip(parts[1:], bounds[1:], strict=True):
                outs.append(p.attend(self, layer, q[:, :, a:b], k[:, :, a:b], v[:, :, a:b]))
            self.rest_s += time.perf_counter() - started
            return torch.cat(outs)

        h = self._layers(ids, positions, attend, bounds[0][1] if len(parts) > 1 else None)
        sampled = [p.sampled + a for p, (a, _) in zip(parts, bounds, strict=True)]
        return self._logits(h[torch.cat(sampled) if len(sampled) > 1 else sampled[0]])

    def _linear(self, x: torch.Tensor, linear: PackedLinear, split: int | None) -> torch.Tensor:
        """``linear(x)`` over every row of the step in one matmul (the weights read once: issue
        42's probe measured a c32 step's decode and prompt rows 159 ms as two matmuls, 126 ms as
        one); with ``split``,
        the prompt rows' (``[split:]``) share of its time, by rows, goes into ``rest_s``."""
        if split is None:
            return linear(x)
        started = time.perf_counter()
        out = linear(x)
        self.rest_s += (time.perf_counter() - started) * (x.shape[0] - split) / x.shape[0]
        return out

    def _layers(self, ids: torch.Tensor, positions: torch.Tensor, attend: Any, split: int | None) -> torch.Tensor:
        """The decoder layers over ``n`` packed tokens at ``positions``; ``attend(layer, q, k, v)``
        (``(1, heads, n, dim)`` queries, ``(1, kv_heads, n, dim)`` keys/values) caches the new
        keys/values and returns the attention output ``(n, heads * dim)``; ``split``: see
        ``_linear``. The last hidden states ``(n, hidden)``."""
        n = ids.shape[0]
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)  # (n, 1, dim)
        h = F.embedding(ids, self.embed)
        for i, layer in enumerate(self.layers):
            x = _rms_norm(h, layer.ln1, layer.eps1)
            qkv = self._linear(x, layer.qkv, split)
            # q and k side by side: one rotary for both heads' sets
            qk = _rotate(qkv[:, :self.q_size + self.kv_size].view(n, self.heads + self.kv_heads, -1), cos, sin)
            q, k = qk[:, :self.heads].transpose(0, 1).unsqueeze(0), qk[:, self.heads:].transpose(0, 1).unsqueeze(0)
            v = qkv[:, self.q_size + self.kv_size:].view(n, self.kv_heads, self.head_dim).transpose(0, 1).unsqueeze(0)
            h = h + self._linear(attend(i, q, k, v), layer.o, split)
            x = _rms_norm(h, layer.ln2, layer.eps2)
            gate_up = self._linear(x, layer.gate_up, split)
            x = self.act(gate_up[:, :self.intermediate]) * gate_up[:, self.intermediate:]
            h = h + self._linear(x, layer.down, split)
        return h

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """The final norm and lm_head of the sampled positions only: ``(rows, vocab)`` float."""
        return self.lm_head(_rms_norm(h, self.norm, self.norm_eps)).float()

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """SDPA of ``(batch, heads, n, dim)`` queries over ``(batch, kv_heads, keys, dim)`` with a
        boolean ``mask`` broadcast to ``(batch, 1, n, keys)``; ``(batch, heads, n, dim)``."""
        batch, _, n, _ = q.shape
        if self.groups > 1 and n == 1:  # one query: each kv head's query group as its queries
            out = F.scaled_dot_product_attention(q.reshape(batch, self.kv_heads, self.groups, self.head_dim),
                                                 k, v, attn_mask=mask, scale=self.scale)
            return out.reshape(batch, self.heads, 1, self.head_dim)
        if self.groups > 1:
            k = k.repeat_interleave(self.groups, dim=1)
            v = v.repeat_interleave(self.groups, dim=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
