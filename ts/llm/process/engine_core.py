"""The engine core: the generation engine in a process of its own (``handler.engine_process``).

vLLM's split, for the same reason: the worker process parses and tokenizes requests, turns each
step's tokens into answers (chunk JSON, frames) and talks to the frontend, while this process
only schedules, runs the forward and samples, step after step. Both hold a GIL of their own, so
the worker's per-token work runs beside the forward instead of between two of its steps.

The worker's side is ``engine_process.py``. Messages (pickled, over one duplex pipe):

* worker -> core: ``("add", groups, params)`` (one request's prompts, all or none),
  ``("cancel", seq_id)``, ``("converse", seq_id, conversation)``, ``("end", conversation)``,
  ``("abort",)``, ``("stop",)``;
* core -> worker: ``("ready", info)`` or ``("load-failed", kind, message)`` once, then per step
  ``("step", updates, stats)`` (each update a plain tuple, ``pack_update``: a dataclass pickles
  several times slower, on both sides, every step), ``("refused", seq_id, error fields)`` for a refused request and
  ``("failed", oom, message)`` for a step that raised (the core has dropped every sequence).

Commands are read between steps, on the core's main thread. A thread blocked reading the pipe
(as the preprocess pool's children have) was woken by every command the worker wrote, on the
engine's core and taking the GIL from it: 3-4 % of the decode rate at 32 running sequences on the
benchmark's machine, where a finished request's next one arrives about every other step. Neither
side blocks for long on a full pipe: the core reads every command that arrived before each step
and the worker every step's message, so a command larger than the pipe's buffer (a very long
prompt) holds the worker's write until the step in progress ends, no longer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from ts.llm.params import LLMRequestError, SequenceUpdate

if TYPE_CHECKING:  # the worker imports this module without loading torch's engine
    from ts.llm.engine.contract import Engine
    from ts.llm.engine.generation import GenerationEngine

logger = logging.getLogger("ts.llm.process.engine_core")

LOG_FORMAT = "%(asctime)s [%(levelname)s] %(name)s - %(message)s"
PR_SET_PDEATHSIG = 1  # prctl(2)


@dataclass
class CoreConfig:
    """What the core needs to load the model and build its engine (picklable)."""

    model_name: str
    path: str
    dtype: str               # "auto" or a dtype name
    trust_remote_code: bool
    device: str
    settings: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    fast_path: bool | None = None


def model_dtype(dtype_setting: str, device: Any) -> Any:
    """``handler.dtype``; "auto": the checkpoint's on accelerators, float32 on a CPU (half
    precision is slow there)."""
    import torch

    from ts.handler_utils.distributed.config import to_dtype

    if dtype_setting != "auto":
        return to_dtype(dtype_setting)
    return torch.float32 if torch.device(device).type == "cpu" else "auto"


def load_causal_lm(path: str, dtype_setting: str, trust: bool, device: Any, **kwargs: Any) -> Any:
    """The Hugging Face causal LM in eval mode. ``kwargs`` go to ``from_pretrained`` (e.g.
    ``tp_plan``, which places the shards); without them the model is moved to ``device``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=model_dtype(dtype_setting, device),
                                                 trust_remote_code=trust, **kwargs)
    if not kwargs:
        model.to(device)
    model.eval()  # type: ignore[no-untyped-call]
    return model


def build_core_engine(config: CoreConfig) -> GenerationEngine:
    import torch
    from transformers import AutoTokenizer

    from ts.llm.engine.choice import build_engine
    from ts.utils.ranks import RankInfo

    started = time.monotonic()
    device = torch.device(config.device)
    logger.info("engine core for %s (pid %d): loading %s on %s", config.model_name, os.getpid(), config.path, device)
    tokenizer = AutoTokenizer.from_pretrained(config.path, trust_remote_code=config.trust_remote_code)
    model = load_causal_lm(config.path, config.dtype, config.trust_remote_code, device)
    engine = build_engine(model, tokenizer, config.settings, config.limits, config.fast_path, RankInfo(), None,
                          device)
    engine.detokenize = False  # the worker does it, but for stop strings (engine_process.py)
    logger.info("engine core for %s: %s loaded in %.1f s", config.model_name, type(model).__name__,
                time.monotonic() - started)
    return engine


def engine_info(engine: GenerationEngine) -> dict[str, Any]:
    return {"max_batch_size": engine.max_batch_size, "max_tokens_per_step": engine.max_tokens_per_step,
            "max_waiting": engine.max_waiting, "eos_token_ids": sorted(engine.eos_token_ids),
            "max_context": engine.max_context, "forward_path": engine.forward_path,
            "model_class": engine.model_class}


def step_stats(engine: Engine) -> tuple[Any, ...]:
    """What the worker shows of a step: its timings and the engine's gauges after it."""
    last = engine.last_step
    return (last.decode_s, last.prefill_s, list(last.prefilled), engine.num_running, engine.num_waiting,
            engine.kv_cache_usage, engine.prefix_hit_rate)


def pack_update(u: SequenceUpdate) -> tuple[Any, ...]:
    """A step's update as the pipe carries it (``unpack_update`` on the worker's side)."""
    error = None if u.error is None else (u.error.status, u.error.message, u.error.param, u.error.code)
    return (u.seq_id, u.new_token_ids, u.text_delta, u.finished, u.finish_reason, u.prompt_tokens,
            u.completion_tokens, u.logprobs, error)


def unpack_update(fields: tuple[Any, ...]) -> SequenceUpdate:
    *values, error = fields
    update = SequenceUpdate(*values)
    if error is not None:
        status, message, param, code = error
        update.error = LLMRequestError(status, message, param=param, code=code)
    return update


def refusal(seq_id: str, exc: LLMRequestError) -> tuple[Any, ...]:
    return ("refused", seq_id, exc.status, exc.message, exc.param, exc.code, exc.retry_after)


def post(conn: Connection, message: tuple[Any, ...]) -> None:
    """Send ``message`` to the worker (its ``recv`` loads it). ``Connection.send`` pickles with
    multiprocessing's own pickler, which sets up a dispatch table per message: 12-15 µs more
    a step's message on the benchmark's machine, in the step's critical path."""
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def apply(engine: Engine, conn: Connection, command: tuple[Any, ...]) -> None:
    kind = command[0]
    if kind == "add":
        groups, params = command[1], command[2]
        try:
            engine.add_all(groups, params)
        except LLMRequestError as exc:
            post(conn, refusal(groups[0][0], exc))
    elif kind == "cancel":
        engine.cancel(command[1])
    elif kind == "converse":  # the paged cache pins a conversation's blocks; the rectangle keeps none
        engine.converse(command[1], command[2])
    elif kind == "end":
        engine.end_conversation(command[1])
    elif kind == "abort":
        engine.abort_all()
    else:
        raise ValueError(f"unknown engine command {kind!r}")


def next_command(conn: Connection, wait: bool) -> tuple[Any, ...] | None:
    """The worker's next command; None at once when none has arrived and ``wait`` is off."""
    if not conn.poll(None if wait else 0):
        return None
    command: tuple[Any, ...] = conn.recv()
    return command


def run(engine: Engine, conn: Connection, model_name: str) -> None:
    """Apply the commands that arrived, take a step while there is work; wait when there is none.
    The worker closing its end raises EOFError here (the caller ends the process)."""
    from ts.service import is_oom

    while True:
        wait = not engine.has_work()
        while (command := next_command(conn, wait)) is not None:
            if command[0] == "stop":
                return
            apply(engine, conn, command)
            wait = not engine.has_work()
        try:
            updates = engine.step()
        except Exception as exc:  # noqa: BLE001 - the worker fails every request and the engine goes on empty
            logger.exception("engine core for %s: generation step failed", model_name)
            engine.abort_all()
            post(conn, ("failed", is_oom(exc), f"{type(exc).__name__}: {exc}"))
            continue
        post(conn, ("step", [pack_update(u) for u in updates], step_stats(engine)))


def die_with_the_worker() -> None:
    """The kernel ends this process when the worker dies, even in the middle of a load or a step
    (Linux's parent-death signal); elsewhere the pipe's end-of-file ends it between steps."""
    worker = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != worker:  # it died before the signal was asked for
        os._exit(0)


def core_main(conn: Connection, config: CoreConfig) -> None:
    """The core process's entry point (spawned by ``engine_process.EngineProcess``)."""
    from ts.handler_utils.distributed.config import ModelConfigError

    die_with_the_worker()
    logging.basicConfig(level=os.environ.get("TS_WORKER_LOG_LEVEL", "INFO"), format=LOG_FORMAT, stream=sys.stdout)
    try:
        engine = build_core_engine(config)
    except ModelConfigError as exc:
        post(conn, ("load-failed", "config", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported to the worker, which fails the model's load
        logger.exception("engine core for %s: loading failed", config.model_name)
        post(conn, ("load-failed", type(exc).__name__, str(exc)))
        return
    post(conn, ("ready", engine_info(engine)))
    try:
        run(engine, conn, config.model_name)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        pass  # the worker is gone: nothing to answer
    logger.info("engine core for %s: stopped", config.model_name)
