"""Rank 0 drives every inference step; the other ranks follow.

The frontend may send a batch to rank 0 only (``pp``) or to every rank (``tp``). Either way
rank 0 alone preprocesses it, publishes the model input on the process group's store, and
every rank then runs the same forward/generate code (its collectives line up). Followers
wait on the store, not in a collective, so an idle server never hits the process-group
timeout, and a batch that fails preprocessing on rank 0 never reaches the other ranks.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

STOP = "__tserve_stop__"


def _encode(payload: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def _decode(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True)


def _round_key() -> str:
    """The same on every rank of one round of the job, different from the rounds before it.

    When torchrun shares its agent's store across restarts (``TORCHELASTIC_USE_AGENT_STORE``),
    a restarted job meets its predecessor's keys: the restart count tells the rounds apart (on
    one machine every rank has the same count). Otherwise (tserve sets
    ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``) each round has a fresh store, and the restart count
    must not be used: across machines the nodes of one round may have made different numbers of
    restarts (a node that joined an elastic job late starts at 0).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        return "attempt" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return "round"


class RankCoordinator:
    """Publishes one payload per step from rank 0; runs ``fn(payload)`` on every rank."""

    def __init__(self, name: str, rank: int, world_size: int, poll_s: float = 5.0) -> None:
        base = dist.distributed_c10d._get_default_store()
        self.store = dist.PrefixStore(f"tserve/{name}/{_round_key()}/", base)
        self.rank = rank
        self.world_size = world_size
        self.poll = timedelta(seconds=poll_s)
        self._step = 0
        self._pending: list[int] = []
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    # rank 0 ---------------------------------------------------------------------------
    def run(self, payload: Any, fn: Callable[[Any], Any]) -> Any:
        """Publish ``payload`` to the followers, then run ``fn`` here (rank 0)."""
        self._publish(payload)
        return fn(payload)

    def stop(self) -> None:
        """Tell the followers to leave their loop (rank 0)."""
        self._publish(STOP)

    def _publish(self, payload: Any) -> None:
        self._collect_acknowledged()
        step = self._step
        self._step += 1
        self.store.set(f"step/{step}", _encode(payload))  # type: ignore[arg-type]  # takes bytes; torch's stub says str
        self._pending.append(step)

    def _collect_acknowledged(self) -> None:
        # A step's key is deleted once every follower has read it.
        for step in list(self._pending):
            if self.store.add(f"ack/{step}", 0) >= self.world_size - 1:
                self.store.delete_key(f"step/{step}")
                self.store.delete_key(f"ack/{step}")
                self._pending.remove(step)

    # ranks > 0 ------------------------------------------------------------------------
    def start_following(self, fn: Callable[[Any], Any]) -> None:
        """Run ``fn`` for every published step in a background thread (ranks > 0)."""
        self._thread = threading.Thread(target=self._follow, args=(fn,), name="tserve-follower",
                                        daemon=True)
        self._thread.start()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until rank 0 called ``stop`` (used by drivers and tests)."""
        return self._stopped.wait(timeout)

    def _follow(self, fn: Callable[[Any], Any]) -> None:
        while True:
            key = f"step/{self._step}"
            try:
                self.store.wait([key], self.poll)
            except Exception:  # noqa: BLE001 - a store wait timeout: keep waiting
                continue
            payload = _decode(self.store.get(key))
            self.store.add(f"ack/{self._step}", 1)
            self._step += 1
            if isinstance(payload, str) and payload == STOP:
                self._stopped.set()
                return
            try:
                fn(payload)
            except Exception as exc:  # noqa: BLE001 - rank 0 reports the batch's failure
                logger.error("rank %d: inference step %d failed: %s", self.rank, self._step - 1, exc)
