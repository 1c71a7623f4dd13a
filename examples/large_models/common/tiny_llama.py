"""A tiny Llama causal LM built from a config (no hub download), with byte-level tokens.

2 decoder layers, hidden size 64, 256-token vocabulary (one token per UTF-8 byte), so the
examples run on two CPU ranks in seconds. The weights are random but seeded, so every run
produces the same archive and the same answers.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB_SIZE = 256
MAX_POSITIONS = 128


def tiny_llama_config():  # -> transformers.LlamaConfig
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )


def build_tiny_llama(seed: int = 0) -> torch.nn.Module:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config()).eval()


def save_tiny_llama(out_dir: Path, weights: str = "safetensors", shards: int = 1,
                    seed: int = 0) -> list[Path]:
    """Write ``config.json`` and the weights to ``out_dir``; return the weight files.

    ``weights="safetensors"`` uses ``save_pretrained``; ``weights="torch"`` writes
    ``torch.save`` state-dict shards ``pytorch_model-0000N.bin`` (no index: the handlers find them).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build_tiny_llama(seed)
    model.config.save_pretrained(str(out_dir))
    if weights == "safetensors" and shards == 1:
        model.save_pretrained(str(out_dir))
        (out_dir / "generation_config.json").unlink(missing_ok=True)
        return sorted(out_dir.glob("*.safetensors"))
    state = model.state_dict()
    names = list(state)
    per = -(-len(names) // shards)
    files = []
    for i in range(shards):
        part = {k: state[k].contiguous() for k in names[i * per:(i + 1) * per]}
        if weights == "safetensors":
            from safetensors.torch import save_file

            path = out_dir / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            save_file(part, str(path))
        else:
            path = out_dir / f"pytorch_model-{i + 1:05d}.bin"
            torch.save(part, path)
        files.append(path)
    return files
