"""The worker's side of the engine core (``engine_core.py``): the engine's interface, answered by
another process.

``EngineProcess`` stands where the handler keeps its ``GenerationEngine``: ``add_all``,
``cancel``, ``converse`` and ``end_conversation`` send a command and return at once; ``step``
returns the updates of every step the core finished since the last call, with the core's gauges
and timings of those steps (waiting up to ``WAIT_S`` for one, unless its caller waits on the pipe
itself: ``waited_on``). The core steps on its own while the worker turns the last step's tokens
into answers: the two overlap. The worker also detokenizes them (``IncrementalText``), but for a
request with stop strings: the core must find those itself to end the sequence, and sends text.

What changes for the handler: a request the engine refuses (a full queue, a prompt past the
context) is refused a step later, as an update carrying the error, instead of by an exception
from ``add_all``; a failed step raises ``EngineStepFailed`` from ``step`` (the core has dropped
every sequence); a core that died raises ``EngineProcessLost``, and the worker must leave (the
frontend starts a new one).
"""

from __future__ import annotations

import logging
import multiprocessing
from typing import Any

from ts.handler_utils.distributed.config import ModelConfigError
from ts.llm.engine.contract import Engine
from ts.llm.engine.sequence import StepStats
from ts.llm.engine.text import IncrementalText
from ts.llm.params import LLMRequestError, SamplingParams, SequenceUpdate
from ts.llm.process.engine_core import CoreConfig, core_main, unpack_update
from ts.utils.cadence import CadencedWait

logger = logging.getLogger("ts.torch_handler.llm_handler")

WAIT_S = 0.02     # the longest step() waits for the core: frames from the frontend are read between
STOP_WAIT_S = 10.0


class EngineStepFailed(RuntimeError):
    """A step raised in the core; ``oom`` when it ran out of memory."""

    def __init__(self, message: str, oom: bool) -> None:
        super().__init__(message)
        self.oom = oom


class EngineProcessLost(RuntimeError):
    """The core process exited (or was killed) while the worker still needed it."""


class EngineProcess:
    """A ``GenerationEngine`` in a spawned process (an ``Engine``); see the module docstring."""

    def __init__(self, config: CoreConfig, tokenizer: Any) -> None:
        mp = multiprocessing.get_context("spawn")
        self._conn, child = mp.Pipe(duplex=True)
        self._process = mp.Process(target=core_main, args=(child, config), name=f"engine-core-{config.model_name}",
                                   daemon=True)
        self._process.start()
        child.close()
        self.model_name = config.model_name
        self._live: set[str] = set()      # sequences the core may still report
        self._tokenizer = tokenizer
        self._texts: dict[str, IncrementalText] = {}  # those the core sends without text
        self.lost: str | None = None      # why the core is gone
        self._wait_s = WAIT_S
        self._steps = CadencedWait()  # the core's step messages come at its step's pace
        self._closed = False
        self.last_step = StepStats()
        self.num_running = self.num_waiting = 0
        self.kv_cache_usage = 0.0
        self.prefix_hit_rate: float | None = None
        info = self._wait_ready()
        self.max_batch_size: int = info["max_batch_size"]
        self.max_tokens_per_step: int = info["max_tokens_per_step"]
        self.max_waiting: int = info["max_waiting"]
        self.max_context: int = info["max_context"]
        self.forward_path: str = f"{info['forward_path']}, in an engine process (pid {self.pid})"
        self.model_class: str = info["model_class"]
        self._eos_token_ids: list[int] = info["eos_token_ids"]

    def waited_on(self) -> int:
        """The pipe's file descriptor, for a caller that waits on it itself (the worker's loop
        selects on it and on the frontend): from then on ``step`` does not wait."""
        self._wait_s = 0.0
        return self._conn.fileno()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def _wait_ready(self) -> dict[str, Any]:
        while not self._conn.poll(0.5):
            if not self._process.is_alive():
                raise RuntimeError(f"the engine process exited with code {self._process.exitcode} while "
                                   "loading the model (see the lines before this one)")
        try:
            msg = self._conn.recv()
        except EOFError as exc:
            self._process.join(5)
            raise RuntimeError(f"the engine process exited with code {self._process.exitcode} while "
                               "loading the model (see the lines before this one)") from exc
        if msg[0] == "ready":
            info: dict[str, Any] = msg[1]
            return info
        self._process.join(5)
        if msg[1] == "config":
            raise ModelConfigError(msg[2])
        raise RuntimeError(f"the engine process could not load the model: {msg[1]}: {msg[2]}")

    # ------------------------------------------------------------------ commands
    def _send(self, *command: Any) -> None:
        if self.lost is None:
            try:
                self._conn.send(command)
            except OSError as exc:
                self._lose(f"the pipe to it broke ({exc})")

    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams,
            fork_ids: list[str] | None = None) -> None:
        self.add_all([(seq_id, prompt_ids, list(fork_ids or []))], params)

    def add_all(self, groups: list[tuple[str, list[int], list[str]]], params: SamplingParams) -> None:
        if self.lost is not None:
            raise LLMRequestError(503, f"the engine process is gone ({self.lost}); the worker restarts: retry",
                                  code="engine_error", retry_after=1)
        self._send("add", groups, params)
        for seq_id, ids, forks in groups:
            for sid in (seq_id, *forks):
                self._live.add(sid)
                if not params.stop:  # with stop strings the core detokenizes, to find them
                    self._texts[sid] = IncrementalText.for_params(self._tokenizer, ids, params, self._eos_token_ids)

    def cancel(self, seq_id: str) -> bool:
        if seq_id not in self._live:
            return False
        self._live.discard(seq_id)
        self._texts.pop(seq_id, None)
        self._send("cancel", seq_id)
        return True

    def converse(self, seq_id: str, conversation: str) -> None:
        self._send("converse", seq_id, conversation)

    def end_conversation(self, conversation: str) -> None:
        self._send("end", conversation)

    def abort_all(self) -> list[str]:
        ids, self._live = sorted(self._live), set()
        self._texts.clear()
        self._send("abort")
        return ids

    def has_work(self) -> bool:
        if self.lost is not None:  # one more step, the one that reports it (the worker then leaves)
            return not self._closed
        return bool(self._live) or self._conn.poll(0)

    # ------------------------------------------------------------------ steps
    def step(self) -> list[SequenceUpdate]:
        """Every step's updates the core sent since the last call (waiting up to WAIT_S for one)."""
        if self.lost is not None:
            raise EngineProcessLost(self.lost)
        stats = StepStats()
        updates: list[SequenceUpdate] = []
        try:
            if self._wait_s:
                self._steps.select([self._conn], self._conn, self._wait_s)
            while self._conn.poll(0):
                msg = self._conn.recv()
                if msg[0] == "step":
                    updates.extend(self._received(msg[1]))
                    self._gauges(msg[2], stats)
                elif msg[0] == "refused":
                    updates.append(self._refused(*msg[1:]))
                else:  # "failed": the core dropped every sequence
                    self._live.clear()
                    self._texts.clear()
                    self.last_step = stats
                    raise EngineStepFailed(msg[2], oom=msg[1])
        except (EOFError, OSError) as exc:
            self._process.join(1)
            self._lose(describe_exit(self._process.exitcode, exc))
            raise EngineProcessLost(self.lost) from exc
        self.last_step = stats
        return updates

    def _received(self, packed: list[tuple[Any, ...]]) -> list[SequenceUpdate]:
        """The step's updates, their text filled in where the core sent none."""
        updates = [unpack_update(fields) for fields in packed]
        for u in updates:
            text = self._texts.get(u.seq_id)
            if text is not None:
                u.text_delta = "".join(text.push(t) for t in u.new_token_ids) + (text.finish() if u.finished else "")
            if u.finished:
                self._live.discard(u.seq_id)
                self._texts.pop(u.seq_id, None)
        return updates

    def _refused(self, seq_id: str, status: int, message: str, param: str | None, code: str | None,
                 retry_after: int | None) -> SequenceUpdate:
        error = LLMRequestError(status, message, param=param, code=code, retry_after=retry_after)
        return SequenceUpdate(seq_id, [], "", True, "error", 0, 0, error=error)

    def _gauges(self, stats: tuple[Any, ...], into: StepStats) -> None:
        decode_s, prefill_s, prefilled, running, waiting, usage, hit_rate = stats
        into.decode_s += decode_s
        into.prefill_s += prefill_s
        into.prefilled.extend(prefilled)
        self.num_running, self.num_waiting, self.kv_cache_usage, self.prefix_hit_rate = (
            running, waiting, usage, hit_rate)
        into.running, into.waiting = running, waiting

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            logger.error("LLM %s: the engine process (pid %s) %s", self.model_name, self.pid, why)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the core (it finishes the step it is in) and wait for it; kill it if it does not go."""
        self._send("stop")
        self._process.join(STOP_WAIT_S)
        if self._process.is_alive():
            logger.warning("LLM %s: the engine process (pid %s) did not stop within %.0f s; killing it",
                           self.model_name, self.pid, STOP_WAIT_S)
            self._process.kill()
            self._process.join(5)
        self._conn.close()
        self._closed = True
        self.lost = self.lost or "stopped"


def _is_an_engine(engine: EngineProcess) -> Engine:
    return engine  # mypy checks EngineProcess against the Engine contract here


def describe_exit(code: int | None, exc: BaseException) -> str:
    if code is not None and code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (SIGKILL: often the kernel's out-of-memory killer)" if name == "SIGKILL" else ""
        return f"was killed by {name}{hint}"
    if code is not None:
        return f"exited with code {code}"
    return f"stopped answering ({type(exc).__name__})"
