"""This process's place in a torchrun job (a plain worker is rank 0 of 1): one description for the
worker's startup (``ts/model_service_worker.py``) and the handlers (``dist_env.rank_info``).
No torch import: the worker reads it before torch is loaded."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class RankInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    restart_count: int = 0  # torchrun's restarts of the job so far

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RankInfo:
        """torchrun's variables; a value that is not an integer stops the worker naming it."""
        env = dict(os.environ if env is None else env)

        def num(key: str, default: int) -> int:
            try:
                return int(env.get(key, default))
            except ValueError:
                raise SystemExit(f"environment variable {key}={env[key]!r} is not an integer") from None

        local_rank = num("LOCAL_RANK", 0)
        return cls(rank=num("RANK", local_rank), local_rank=local_rank,
                   world_size=num("WORLD_SIZE", 1), local_world_size=num("LOCAL_WORLD_SIZE", 1),
                   restart_count=num("TORCHELASTIC_RESTART_COUNT", 0))
