"""The per-file table of run_torchserve_tests.sh: each run's pytest summary per test file, then
every test that passes on TorchServe 0.12 and not on a tserve run.

    python compat_table.py OUT[,OUT...] RUN [RUN...]     (RUN: torchserve, tserve, switch)

With several OUT folders, a later one's results replace an earlier one's for the files it ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

TITLES = {"torchserve": "TorchServe 0.12", "tserve": "tserve", "switch": "tserve, `compatibility=torchserve-0.12`"}


def _summaries(out: Path, run: str) -> dict[str, str]:
    path = out / f"{run}.summary"
    if not path.exists():
        return {}
    return dict(line.split("\t", 1) for line in path.read_text().splitlines() if "\t" in line)


def _outcomes(out: Path, run: str) -> dict[str, str]:
    path = out / f"{run}.outcomes"
    found: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            outcome, _, node = line.partition(" ")
            if node:
                found[node] = outcome if found.get(node) in (None, "PASSED") else found[node]
    return found


def summaries(outs: list[Path], run: str) -> dict[str, str]:
    """file -> pytest's summary line, the latest folder's for each file."""
    merged: dict[str, str] = {}
    for out in outs:
        merged.update(_summaries(out, run))
    return merged


def outcomes(outs: list[Path], run: str) -> dict[str, str]:
    """node id -> PASSED / FAILED / ERROR / ... (a test failing in one phase and passing in another
    counts as failing); the latest folder's for the files it ran."""
    merged: dict[str, str] = {}
    for out in outs:
        rerun = set(_summaries(out, run))
        merged = {n: o for n, o in merged.items() if n.split("::", 1)[0] not in rerun}
        merged.update(_outcomes(out, run))
    return merged


def table(outs: list[Path], runs: list[str]) -> str:
    per_run = {run: summaries(outs, run) for run in runs}
    files = sorted({f for s in per_run.values() for f in s})
    lines = ["| file | " + " | ".join(TITLES.get(r, r) for r in runs) + " |",
             "|---|" + "---|" * len(runs)]
    for f in files:
        lines.append(f"| `{f}` | " + " | ".join(per_run[r].get(f, "not run") for r in runs) + " |")
    if "torchserve" in runs:
        reference = outcomes(outs, "torchserve")
        passing = sorted(n for n, o in reference.items() if o == "PASSED")
        for run in (r for r in runs if r != "torchserve"):
            got = outcomes(outs, run)
            missing = [n for n in passing if got.get(n) != "PASSED"]
            lines.append("")
            lines.append(f"Passing on TorchServe 0.12 and not on {TITLES.get(run, run)}: "
                         + (", ".join(f"`{n}` ({got.get(n, 'not run')})" for n in missing) if missing else "none")
                         + f" ({len(passing)} tests pass on TorchServe 0.12).")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    print(table([Path(p) for p in argv[1].split(",")], argv[2:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
