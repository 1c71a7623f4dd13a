"""Shared fixtures of the LLM tests: the tiny Llama and its local tokenizer (ts/testing/tiny_llm.py).

Import the fixture functions into a test module (pytest finds them by their ``name``):
``from llm_support import model_fixture, one_thread_fixture, tok_fixture  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ts.testing.tiny_llm import build_model, build_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


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


def conversation_texts(tok, model, prompts: list[str], n: int) -> list[str]:
    """Each turn's greedy text given the whole conversation before it (ts/llm/handler/sessions.py): the
    earlier turns' prompt and generated ids, then the turn's own prompt ids."""
    history: list[int] = []
    out = []
    for prompt in prompts:
        ids = history + tok(prompt)["input_ids"]
        gen = reference(model, ids, n)
        out.append(tok.decode(gen, skip_special_tokens=True))
        history = ids + gen
    return out


@contextlib.contextmanager
def llm_server(tmp: Path, model_name: str, model_config: str, config: dict[str, Any] | None = None) -> Iterator[Any]:
    """A server (config.properties keys ``config``) with the tiny Llama (examples/llm) archived as
    ``model_name`` with this model-config.yaml, registered (a torchrun job when the config asks for
    ranks)."""
    import harness

    (tmp / "model-config.yaml").write_text(model_config)
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(tmp / "store", model_name=model_name, config_file=tmp / "model-config.yaml")
    with harness.Server(tmp / "store", config, env={"HF_HUB_OFFLINE": "1", "TS_DIST_TIMEOUT_S": "60"}) as s:
        r = s.register(f"{model_name}.mar", synchronous="true", timeout=300)
        assert r.status_code == 200, r.text
        yield s


def llm_series(server: Any, model_name: str) -> dict[str, float]:
    """``model_name``'s samples of the llm_* families on /metrics (metrics_mode prometheus):
    ``{name{labels but hostname}: value}``."""
    import re

    import requests

    text = requests.get(f"{server.metrics_url}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(llm_\w+)\{(.*)\} (\S+)$', line)
        if m and f'model_name="{model_name}"' in m.group(2):
            labels = ",".join(p for p in m.group(2).split(",") if p and not p.startswith("hostname="))
            out[f"{m.group(1)}{{{labels}}}"] = float(m.group(3))
    return out


def texts_at_once(send: Any, prompts: list[str], pause_after: int | None = None) -> dict[str, str]:
    """Each prompt's answer text (``send(prompt)``: a 200 with a TorchServe-style JSON answer), the
    prompts sent together from threads; ``pause_after``: 50 ms after that many have started, so
    the rest arrive while those are generating."""
    import threading
    import time

    results: dict[str, str] = {}

    def one(prompt: str) -> None:
        r = send(prompt)
        assert r.status_code == 200, r.text
        results[prompt] = r.json()["text"]

    threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for i, t in enumerate(threads, 1):
        t.start()
        if i == pause_after:
            time.sleep(0.05)
    for t in threads:
        t.join(timeout=120)
    return results


def generate(server: Any, model_name: str, prompt: str, new_tokens: int, **kw: Any) -> Any:
    """POST a TorchServe-style generate request (greedy unless ``kw`` says otherwise); with
    ``stream=True`` the response is read as it comes."""
    import requests

    return requests.post(f"{server.inference_url}/predictions/{model_name}", timeout=120, stream=bool(kw.get("stream")),
                         json={"prompt": prompt, "max_new_tokens": new_tokens, "temperature": 0, **kw})


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
            updates.setdefault(u.seq_id, []).append(u)
        stats.append(engine.last_step)
        step += 1
        assert step < 2000
    return updates, stats


def logits_after(model: Any, ids: list[int]) -> torch.Tensor:
    """The model's raw next-token logits after ``ids`` (one forward, no cache)."""
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, -1].float()
    return logits.clone()  # a normal tensor: callers write into it


def penalised_greedy(model: Any, ids: list[int], n: int, presence: float, frequency: float,
                     repetition: float) -> list[int]:
    """Greedy decoding with the penalties applied to the raw logits by hand (vLLM's formulas:
    repetition on prompt and output tokens, then frequency per occurrence and presence once)."""
    out: list[int] = []
    for _ in range(n):
        logits = logits_after(model, ids + out)
        for t in set(ids + out):
            logits[t] = logits[t] / repetition if logits[t] > 0 else logits[t] * repetition
        for t in set(out):
            logits[t] -= frequency * out.count(t) + presence
        out.append(int(logits.argmax()))
    return out


def tokens(ups: list) -> list[int]:
    return [t for u in ups for t in u.new_token_ids]


def drain(handler: Any) -> dict[str, list[Any]]:
    """Step an LLMHandler until it has no work: each request's events, in order."""
    events: dict[str, list[Any]] = {}
    while handler.has_work():
        for e in handler.step():
            events.setdefault(e.request_id, []).append(e)
    return events
