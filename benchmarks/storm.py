"""Register/scale/unregister storm (issue 43): no worker process outlives the model it was started for.

One server (benchmarks/servers.py, an echo model's archive in its store, none registered) and,
for ``duration`` seconds, five clients on one model name, ``storm``:

  register        POST /models?...&initial_workers=1&synchronous=true, back to back
  register async  the same with synchronous=false
  scale up        PUT /models/storm?min_worker=2&max_worker=2&synchronous=false
  scale down      PUT /models/storm?min_worker=1&max_worker=1&synchronous=false
  unregister      DELETE /models/storm

The registrars send back to back. The other three aim at the race that used to leak a worker (a
scale that found the version just before an unregister took it out started a worker that no model
describes and no unregister stops): the unregisterer waits for the next registration to be sent,
the scalers for the next registration or unregister to be announced (each at most ``PACE_S``);
each announces its own call, then sends it ``0..JITTER_S`` seconds later, so a scale lands just
before or just after the unregister it aims at (both wait), on the registration itself and on
its first workers' start.

Then every model is unregistered, and for up to ``settle`` seconds the server's processes are
checked against the describe API (benchmarks/worker_census.py) until none has been a worker that
no model describes for ``CONFIRM_S`` seconds in a row. The invariants: no such worker at the end,
every call answered (no reset, no other connection error), and no answer "Internal error" (an
exception the management API did not expect: an unregister racing a failed registration's cleanup
was answered 500 so).
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from benchmarks import models, servers, worker_census

MODEL = "storm"
PACE_S = 0.2  # a scaler or the unregisterer fires at least this often, registration or not
JITTER_S = 0.005  # ... and within this long after the call it aims at was sent
RESET = "reset"
CONFIRM_S = 3.0  # the census must find no undescribed worker this long in a row
# the answer to a call that reached the race this storm is for, on a server that has the fix: a
# scale or registration that found the version before an unregister retired it (WorkerScaler)
RETIRED = b"was unregistered; no worker is started"
RETIRED_LABEL = "404 retired"
# the management API's answer to an exception it did not expect: a bug, whatever the call
INTERNAL = b"Internal error: "
INTERNAL_LABEL = "internal"

CALLS: dict[str, tuple[str, str]] = {
    "register": ("POST", "/models?" + urlencode({"url": "echo.mar", "model_name": MODEL, "initial_workers": 1,
                                                  "synchronous": "true"})),
    "register async": ("POST", "/models?" + urlencode({"url": "echo.mar", "model_name": MODEL, "initial_workers": 1,
                                                        "synchronous": "false"})),
    "scale up": ("PUT", f"/models/{MODEL}?min_worker=2&max_worker=2&synchronous=false"),
    "scale down": ("PUT", f"/models/{MODEL}?min_worker=1&max_worker=1&synchronous=false"),
    "unregister": ("DELETE", f"/models/{MODEL}"),
}
REGISTRARS = ("register", "register async")
# what each aiming client waits for: the calls it aims at
AIMS = {"scale up": (*REGISTRARS, "unregister"), "scale down": (*REGISTRARS, "unregister"), "unregister": REGISTRARS}


@dataclass
class Storm:
    """The clients' shared state: outcomes per call, and how many calls of each kind were sent (what the aiming ones wait for)."""

    port: int
    until: float
    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: {k: Counter() for k in CALLS})
    sent_by_kind: Counter[str] = field(default_factory=Counter)
    refusals: dict[str, str] = field(default_factory=dict)  # the first answer of each call kind and error status
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: threading.Condition = field(default_factory=threading.Condition)

    def call(self, kind: str, conn: http.client.HTTPConnection) -> bool:
        """One call on ``conn`` (keep-alive: no connect between a call and the one it aims at);
        whether ``conn`` can be used again."""
        method, path = CALLS[kind]
        keep = False
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            body = resp.read()
            label, keep = str(resp.status), not resp.will_close
            if resp.status == 404 and RETIRED in body:
                label = RETIRED_LABEL
            elif resp.status >= 500 and INTERNAL in body:
                label = f"{resp.status} {INTERNAL_LABEL}"
            if resp.status >= 400:
                self.refusals.setdefault(f"{kind} {label}", body[:400].decode("utf-8", "replace"))
        except (ConnectionResetError, BrokenPipeError):
            label = RESET
        except (OSError, http.client.HTTPException) as exc:  # no answer: named
            label = type(exc).__name__
        with self.lock:
            self.outcomes[kind][label] += 1
        return keep

    def client(self, kind: str, rng: random.Random) -> None:
        """Sends ``kind`` until the storm ends: back to back for a registrar, else aimed (see AIMS)."""
        aims, seen = AIMS.get(kind, ()), 0
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        while time.monotonic() < self.until:
            if aims:
                seen = self.wait_past(aims, seen)
            with self.sent:  # announced before the jitter: the calls aiming at it may land before it too
                self.sent_by_kind[kind] += 1
                self.sent.notify_all()
            if aims:
                time.sleep(rng.uniform(0.0, JITTER_S))
            if not self.call(kind, conn):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.close()

    def sent_of(self, kinds: tuple[str, ...]) -> int:
        return sum(self.sent_by_kind[k] for k in kinds)

    def wait_past(self, kinds: tuple[str, ...], seen: int) -> int:
        """Waits (at most PACE_S) for a call of ``kinds`` announced after the ``seen`` first ones; how many now."""
        with self.sent:
            self.sent.wait_for(lambda: self.sent_of(kinds) != seen, timeout=PACE_S)
            return self.sent_of(kinds)


def unregister_all(port: int, timeout: float) -> list[str]:
    """Unregisters every version of every model; the names still listed after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while names := worker_census.model_names(port):
        if time.monotonic() > deadline:
            return names
        for name in names:
            servers.http_request(port, "DELETE", f"/models/{name}", timeout=120)
    return []


def settle(srv: servers.Server, seconds: float, confirm_s: float = CONFIRM_S) -> tuple[list[worker_census.Worker], float]:
    """Polls the census until it has found no undescribed worker for ``confirm_s`` seconds in a row
    (a leaked worker that restarts is not missed between two of its lives), for at most ``seconds``
    plus that: (the undescribed workers last seen, or none; seconds until the census came clean)."""
    t0 = time.monotonic()
    clean_since: float | None = None
    last_seen: list[worker_census.Worker] = []
    while True:
        left = worker_census.census(srv.pid, srv.management_port)
        now = time.monotonic()
        if left:
            clean_since, last_seen = None, left
        elif clean_since is None:
            clean_since = now
        if clean_since is not None and now - clean_since >= confirm_s:
            return [], round(clean_since - t0, 1)
        if now - t0 >= seconds + confirm_s:
            return last_seen, round(now - t0, 1)
        time.sleep(0.5)


def run(work: Path, duration: float, settle_s: float, kind: str = "tserve", seed: int = 43) -> dict[str, Any]:
    """One storm against a fresh server of ``kind`` (benchmarks.servers.kinds()); its report."""
    store = work / "store"
    store.mkdir(parents=True, exist_ok=True)
    models.build_tserve(models.ModelSpec("echo", str(models.HANDLERS / "hostile_soak_handler.py")), store)
    with servers.Server(servers.kinds()[kind], store, run_dir=work / "server") as srv:
        srv.wait_ready(timeout=180)
        storm = Storm(srv.management_port, time.monotonic() + duration)
        rng = random.Random(seed)
        threads = [threading.Thread(target=storm.client, args=(k, random.Random(rng.random())), daemon=True)
                   for k in CALLS]
        for th in threads:
            th.start()
        for th in threads:
            th.join(duration + 300)
        still_listed = unregister_all(srv.management_port, 120)
        left, waited = settle(srv, settle_s)
        srv._check_alive()
        outcomes = {k: dict(c.most_common()) for k, c in storm.outcomes.items()}
        return {"server": kind, "duration_s": duration, "outcomes": outcomes,
                "race_reached": race_hits({"outcomes": outcomes}), "first_refusals": storm.refusals,
                "models_listed_after_unregister": still_listed, "settle_s": waited,
                "undescribed_workers": [{"pids": list(w.pids), "cmdline": w.cmdline[:300]} for w in left]}


def problems(report: dict[str, Any]) -> list[str]:
    """What broke the storm's invariants (empty: it held)."""
    out = []
    if report["undescribed_workers"]:
        out.append(f"{len(report['undescribed_workers'])} worker(s) that no model describes "
                   f"{report['settle_s']} s after every model was unregistered: "
                   + ", ".join(str(w["pids"]) for w in report["undescribed_workers"]))
    unanswered = {f"{kind}: {label}": n for kind, c in report["outcomes"].items()
                  for label, n in c.items() if not label.split()[0].isdigit()}
    if unanswered:
        out.append(f"calls without an answer: {unanswered}")
    internal = {f"{kind}: {label}": n for kind, c in report["outcomes"].items()
                for label, n in c.items() if label.endswith(INTERNAL_LABEL)}
    if internal:
        out.append(f"answers 'Internal error' (an exception the server did not expect): {internal}")
    if report["models_listed_after_unregister"]:
        out.append(f"models still listed after unregistering all: {report['models_listed_after_unregister']}")
    return out


def race_hits(report: dict[str, Any]) -> int:
    """How often a call met a version an unregister had retired under it (the fix refused its worker)."""
    return sum(c.get(RETIRED_LABEL, 0) for c in report["outcomes"].values())


def line(report: dict[str, Any]) -> str:
    """One line per run: each call's answers, then the invariants."""
    calls = "; ".join(f"{k} " + ", ".join(f"{s} x{n}" for s, n in c.items()) for k, c in report["outcomes"].items())
    return (f"{calls}; race reached {race_hits(report)} times (a worker refused for a retired version); undescribed workers "
            f"{len(report['undescribed_workers'])} (settled in {report['settle_s']} s)")
