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
* one boolean attention mask per forward, shared by all layers: key column ``j`` is visible to a
  query at position ``p`` when ``j <= p``. That one rule covers the three layouts the engine runs:
  right-padded prompts prefilled together, a chunk of a long prompt after its earlier chunks, and
  a decode step over ``BatchCache`` rows (row ``r``'s new token sits at column ``length_r``);
* the new keys/values written in place into the engine's ``BatchCache`` buffers (decode), or
  appended with the prompt cache's own ``update`` (prefill);
* the final norm and lm_head only on the rows' sampled positions.

The model's results are unchanged up to float rounding of the fused matmuls; the engine's tests
check greedy tokens against ``generate``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ts.llm.kvcache import BatchCache

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
                 "ln1", "ln2", "eps1", "eps2")

    def __init__(self, layer: Any) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        self.qkv_w, self.qkv_b = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
        self.o_w, self.o_b = attn.o_proj.weight, attn.o_proj.bias
        self.gate_up_w, self.gate_up_b = _fuse([mlp.gate_proj, mlp.up_proj])
        self.down_w, self.down_b = mlp.down_proj.weight, mlp.down_proj.bias
        self.ln1, self.eps1 = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.ln2, self.eps2 = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face's Llama RMSNorm, op for op (float32 statistics, weight after the cast back)."""
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
        from transformers.activations import ACT2FN

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
        self.act = ACT2FN[config.hidden_act]
        self.embed = inner.embed_tokens.weight
        self.layers = [_Layer(layer) for layer in inner.layers]
        self.norm, self.norm_eps = inner.norm.weight, inner.norm.variance_epsilon
        self.lm_head_w = model.lm_head.weight
        self.lm_head_b = getattr(model.lm_head, "bias", None)
        self.intermediate = self.layers[0].gate_up_w.shape[0] // 2
        with torch.inference_mode():  # the model's own rotary module: its scaling and dtype
            positions = torch.arange(config.max_position_embeddings, device=self.embed.device).unsqueeze(0)
            cos, sin = inner.rotary_emb(self.embed[:1].unsqueeze(0), position_ids=positions)
        half = self.head_dim // 2
        # (max_positions, head_dim); the sine's first half negated for _rotate
        self.cos, self.sin = cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1)

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any,
                 last: list[int] | None = None) -> torch.Tensor:
        rows, n = input_ids.shape
        if isinstance(cache, BatchCache):
            return self._decode(input_ids, positions, cache)
        past = cache.get_seq_length()
        if rows > 1 and past == 0 and last is not None:
            return self._packed_prefill(input_ids, positions, cache, last)

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return cache.update(k, v, i)

        keys = torch.arange(past + n, device=input_ids.device)
        h = self._layers(input_ids, positions, keys <= positions.unsqueeze(-1), store)
        h = h[:, -1] if last is None else h[torch.arange(rows, device=h.device), torch.tensor(last, device=h.device)]
        return self._logits(h)

    def _decode(self, input_ids: torch.Tensor, positions: torch.Tensor, batch: BatchCache) -> torch.Tensor:
        """One token per ``BatchCache`` row, written in place at the row's own column."""
        rows, span = input_ids.shape[0], batch.width + 1

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            own = batch.owner_layers[i]
            own.k[batch.rows_index, :, batch.columns] = k[:, :, 0]
            own.v[batch.rows_index, :, batch.columns] = v[:, :, 0]
            return own.k[:rows, :, :span], own.v[:rows, :, :span]

        mask = torch.arange(span, device=input_ids.device) <= positions.unsqueeze(-1)
        return self._logits(self._layers(input_ids, positions, mask, store)[:, -1])

    def _packed_prefill(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any,
                        last: list[int]) -> torch.Tensor:
        """Right-padded whole prompts run packed into one row, padding left out (prompts of 2 and
        80 tokens cost 82 tokens, not 160); each prompt's tokens see only its own earlier ones.
        The cache still gets the padded ``(rows, heads, width, dim)`` layout the engine copies
        rows from (zeros where the padding was: never read)."""
        rows, width = input_ids.shape
        device = input_ids.device
        lengths = torch.tensor(last, device=device) + 1
        real = (torch.arange(width, device=device) < lengths.unsqueeze(1)).reshape(-1).nonzero().squeeze(1)
        packed_pos = positions.reshape(-1)[real].unsqueeze(0)
        segment = torch.repeat_interleave(torch.arange(rows, device=device), lengths)
        mask = (segment.unsqueeze(1) == segment.unsqueeze(0)) & (packed_pos[0].unsqueeze(0) <= packed_pos[0].unsqueeze(1))

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            padded = []
            for t in (k, v):  # (1, heads, total, dim) -> (rows, heads, width, dim)
                flat = t.new_zeros(rows * width, self.kv_heads, self.head_dim)
                flat[real] = t[0].transpose(0, 1)
                padded.append(flat.view(rows, width, self.kv_heads, self.head_dim).transpose(1, 2))
            cache.update(padded[0], padded[1], i)
            return k, v

        h = self._layers(input_ids.reshape(-1)[real].unsqueeze(0), packed_pos, mask.unsqueeze(0), store)
        return self._logits(h[0, lengths.cumsum(0) - 1])

    def _layers(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                store: Any) -> torch.Tensor:
        """The decoder layers over ``(rows, n)`` tokens at ``positions``; ``mask`` ``(rows, n,
        keys)`` says which keys each query sees, shared by all layers; ``store(layer, k, v)``
        caches the new keys/values and returns those attention reads. The last hidden states."""
        rows, n = input_ids.shape
        mask = mask.unsqueeze(1)
        cos, sin = self.cos[positions].unsqueeze(2), self.sin[positions].unsqueeze(2)  # (rows, n, 1, dim)
        h = F.embedding(input_ids, self.embed)
        for i, layer in enumerate(self.layers):
            x = _rms_norm(h, layer.ln1, layer.eps1)
            qkv = F.linear(x, layer.qkv_w, layer.qkv_b)
            # q and k side by side: one rotary for both heads' sets
            qk = _rotate(qkv[..., :self.q_size + self.kv_size].view(rows, n, self.heads + self.kv_heads, -1), cos, sin)
            q, k = qk[:, :, :self.heads].transpose(1, 2), qk[:, :, self.heads:].transpose(1, 2)
            v = qkv[..., self.q_size + self.kv_size:].view(rows, n, self.kv_heads, self.head_dim).transpose(1, 2)
            k, v = store(i, k, v)
            h = h + F.linear(self._attention(q, k, v, mask, rows, n), layer.o_w, layer.o_b)
            x = _rms_norm(h, layer.ln2, layer.eps2)
            gate_up = F.linear(x, layer.gate_up_w, layer.gate_up_b)
            x = self.act(gate_up[..., :self.intermediate]) * gate_up[..., self.intermediate:]
            h = h + F.linear(x, layer.down_w, layer.down_b)
        return h

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """The final norm and lm_head of the sampled positions only: ``(rows, vocab)`` float."""
        return F.linear(_rms_norm(h, self.norm, self.norm_eps), self.lm_head_w, self.lm_head_b).float()

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                   rows: int, n: int) -> torch.Tensor:
        """SDPA over the kv heads; ``(rows, n, heads * head_dim)``."""
        if self.groups > 1 and n == 1:  # one query: each kv head's query group as its queries
            out = F.scaled_dot_product_attention(q.reshape(rows, self.kv_heads, self.groups, self.head_dim),
                                                 k, v, attn_mask=mask, scale=self.scale)
            return out.reshape(rows, 1, self.q_size)
        if self.groups > 1:
            k = k.repeat_interleave(self.groups, dim=1)
            v = v.repeat_interleave(self.groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        return out.transpose(1, 2).reshape(rows, n, self.q_size)
