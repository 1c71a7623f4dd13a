"""Shared fixtures of the LLM tests: the tiny Llama and its local tokenizer (ts/llm/tiny.py).

Import the fixture functions into a test module (pytest finds them by their ``name``):
``from llm_support import model_fixture, one_thread_fixture, tok_fixture  # noqa: F401``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ts.llm.tiny import build_model, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module", autouse=True, name="one_thread")
def one_thread_fixture():
    """A 64-wide model gains nothing from intra-op threads; on a shared machine they only wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", name="tok")
def tok_fixture():
    return build_tokenizer()


@pytest.fixture(scope="module", name="model")
def model_fixture(tok):
    return build_model(tok)


@pytest.fixture(scope="module", name="model_dir")
def model_dir_fixture(tmp_path_factory, model, tok):
    """A folder holding the tiny Llama saved with save_pretrained (as an archive carries it)."""
    root = tmp_path_factory.mktemp("llm")
    model.save_pretrained(root / "tiny-llama")
    tok.save_pretrained(root / "tiny-llama")
    return root


def greedy_texts(prompts: list[str], new_tokens: int) -> dict[str, str]:
    """Each prompt's greedy continuation by Hugging Face's generate, alone: what a server must
    give under continuous batching, on one rank or several."""
    tok = build_tokenizer()
    model = build_model(tok)
    out = {}
    for prompt in prompts:
        ids = tok(prompt)["input_ids"]
        gen = reference(model, ids, new_tokens)
        out[prompt] = tok.decode(gen, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return out


def reference(model, ids: list[int], n: int, eos: int | list[int] | None = None) -> list[int]:
    """``model.generate(do_sample=False)`` for one prompt alone: the new token ids."""
    kwargs = {} if eos is None else {"eos_token_id": eos}
    device = next(model.parameters()).device
    out = model.generate(torch.tensor([ids], device=device),
                         attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
                         do_sample=False, max_new_tokens=n, **kwargs)
    return out[0, len(ids):].tolist()


def run(engine: Any, arrivals: dict[int, list[tuple[str, list[int], Any]]],
        cancels: dict[int, list[str]] | None = None) -> tuple[dict[str, list], list]:
    """Step a ``GenerationEngine`` until idle, adding arrivals[step] (id, prompt ids,
    SamplingParams) and cancelling cancels[step] before that step; returns updates per id and
    each step's stats."""
    updates: dict[str, list] = {}
    stats = []
    step = 0
    while any(k >= step for k in arrivals) or engine.has_work():
        for seq_id, ids, params in arrivals.get(step, []):
            engine.add(seq_id, ids, params)
            updates[seq_id] = []
        for seq_id in (cancels or {}).get(step, []):
            engine.cancel(seq_id)
        for u in engine.step():
            updates[u.seq_id].append(u)
        stats.append(engine.last_step)
        step += 1
        assert step < 2000
    return updates, stats


def tokens(ups: list) -> list[int]:
    return [t for u in ups for t in u.new_token_ids]
