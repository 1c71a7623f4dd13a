"""``benchmarks.soak hostile``: the hostile soak's scenarios, each run ``--runs`` times, each with its invariant.

    .venv/bin/python -m benchmarks.soak hostile [--only classes|storm|sigterm ...] [--runs N] [options]

  classes  valid load mixed with every hostile class of issue 27, then ``torchserve --stop`` under
           load (benchmarks/hostile_soak.py; ``--duration``, ``--clients``, ``--pause``, ``--skip``)
  storm    two registrars, two scalers and an unregisterer on one model name (issue 43;
           benchmarks/storm.py; ``--storm-duration``, ``--settle``): then no worker process that no
           model describes, and every call answered
  sigterm  SIGTERM to the frontend while ``--stop-clients`` keep-alive clients predict (issue 43;
           benchmarks/stop_under_load.py; ``--warm``, ``--transport``): no connection reset, no 503
           without ``Connection: close``

Every scenario named by ``--only`` (all three without it) runs ``--runs`` times (default 1), one
at a time, each on a fresh server. A line per run, then "k of N" per scenario on stdout; JSON to
``--out``; exit status 1 when any run broke its invariant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import hostile_soak, servers, stop_under_load, storm

SCENARIOS = ("classes", "storm", "sigterm")


def classes_run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[str], str]:
    report = hostile_soak.soak(argparse.Namespace(**{**vars(args), "work": str(work)}))
    report["problems"] = hostile_soak.verdict(report)
    return report, report["problems"], "\n" + hostile_soak.summary(report)


def storm_run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[str], str]:
    report = storm.run(work, args.storm_duration, args.settle, kind=args.server, seed=args.seed)
    report["problems"] = storm.problems(report)
    return report, report["problems"], storm.line(report)


def sigterm_run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[str], str]:
    report = stop_under_load.one_report(stop_under_load.one_run(work, args.stop_clients, args.warm, args.transport))
    report.update(transport=args.transport, clients=args.stop_clients)
    return report, report["problems"], f"{args.transport}, {args.stop_clients} clients: " + stop_under_load.line(report)


RUNNERS: dict[str, Callable[[argparse.Namespace, Path], tuple[dict[str, Any], list[str], str]]] = {
    "classes": classes_run, "storm": storm_run, "sigterm": sigterm_run}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="benchmarks.soak hostile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=SCENARIOS, help="run only this scenario (repeatable)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each scenario (default 1)")
    hostile_soak.add_arguments(ap)
    ap.add_argument("--storm-duration", type=float, default=60.0, help="seconds of the storm (default 60)")
    ap.add_argument("--settle", type=float, default=30.0,
                    help="seconds the storm's workers get to end after every model was unregistered (default 30)")
    ap.add_argument("--server", default="tserve",
                    help="the storm's server (benchmarks/servers.py kinds; default tserve, the working tree's build)")
    ap.add_argument("--seed", type=int, default=43, help="seed of the storm's timing (default 43)")
    ap.add_argument("--warm", type=float, default=3.0, help="sigterm: seconds of load before the stop (default 3)")
    ap.add_argument("--transport", choices=["epoll", "nio"], default="epoll", help="sigterm: the transport (default epoll)")
    ap.add_argument("--out", default=str(servers.BENCH / "hostile_soak.json"), help="JSON report")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    args = ap.parse_args(argv)
    if args.runs < 1 or args.storm_duration <= 0 or args.settle < 0:
        ap.error("need --runs >= 1, --storm-duration > 0 and --settle >= 0")
    chosen = [s for s in SCENARIOS if s in (args.only or SCENARIOS)]
    servers.snapshot_tserve()  # the servers run from a copy: a jar rebuilt meanwhile cannot break them
    results: dict[str, Any] = {"command": " ".join(["python -m benchmarks.soak hostile", *argv])}
    for scenario in chosen:
        runs = []
        for i in range(args.runs):
            report, problems, text = RUNNERS[scenario](args, Path(args.work).resolve() / f"{scenario}-{i}")
            runs.append(report)
            print(f"{scenario} run {i + 1}/{args.runs}: {text}" + ("  FAIL: " + "; ".join(problems) if problems else ""),
                  flush=True)
        results[scenario] = runs
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    failed = 0
    for scenario in chosen:
        bad = sum(1 for r in results[scenario] if r["problems"])
        failed += bad
        print(f"{scenario}: {args.runs - bad} of {args.runs} runs kept the invariant")
    print(f"report: {args.out}")
    return 1 if failed else 0
