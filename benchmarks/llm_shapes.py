"""The LLM benchmark's models beside vLLM: the toy (overheads) and a model of a real shape.

* ``toy``: ``llm.py``'s model (hidden 256, 4 layers, 4 heads of 64, 2 KV heads, context 256);
* ``realistic``: a Llama with hidden 1024, 16 layers, 16 heads (8 KV heads, head dim 64),
  intermediate 2816 -- 190 M parameters with the benchmark's small vocabulary --, random seeded
  weights at scale 0.02 (Hugging Face's default init), context 1024.

Both are saved once in float32 with ``save_pretrained`` (with the benchmark's tokenizer) and served
in the dtype each cell asks for: both servers cast the same float32 files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    weight_scale: float
    context: int
    shared_prefix_words: int  # the shared-prefix cells' common preamble (fits the context)


SHAPES = {
    "toy": Shape(hidden=256, layers=4, heads=4, kv_heads=2, intermediate=512, weight_scale=0.2, context=256,
                 shared_prefix_words=60),
    "realistic": Shape(hidden=1024, layers=16, heads=16, kv_heads=8, intermediate=2816, weight_scale=0.02,
                       context=1024, shared_prefix_words=400),
}
SEED = 0


def build_llama(tokenizer: Any, shape: Shape, seed: int = SEED) -> Any:
    """A float32 ``LlamaForCausalLM`` of ``shape`` with seeded random weights, in eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        head_dim=shape.hidden // shape.heads, max_position_embeddings=shape.context,
        initializer_range=shape.weight_scale, tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.eval()
    return model


def model_folder(work: Path, name: str) -> Path:
    """``work/llm-<name>``: the model of ``SHAPES[name]`` and the tokenizer, built once (a
    ``.complete`` marker is written last, so a half-saved folder is built again)."""
    from ts.testing.tiny_llm import build_tokenizer

    folder = work / f"llm-{name}"
    marker = folder / ".complete"
    if marker.exists():
        return folder
    tokenizer = build_tokenizer()
    build_llama(tokenizer, SHAPES[name]).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    marker.write_text("")
    return folder


def parameters(shape: Shape, vocab: int) -> int:
    """Parameters of the model (embeddings and lm_head included)."""
    head_dim = shape.hidden // shape.heads
    attn = shape.hidden * head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    layer = attn + 3 * shape.hidden * shape.intermediate + 2 * shape.hidden
    return shape.layers * layer + 2 * vocab * shape.hidden + shape.hidden
