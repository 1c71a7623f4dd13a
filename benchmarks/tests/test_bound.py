"""The bound scenario's pieces: the combined bound's formula, the medians, and the frontend bound
server itself (compiled against the frontend jar, answering a real POST)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bound, servers

JAR = Path(__file__).resolve().parents[2] / "ts" / "frontend" / "tserve-frontend.jar"


def test_the_combined_bound_charges_every_part_of_a_request_to_the_same_cores() -> None:
    frontend = {"server_cpu_us_per_req": 30.0, "client_cpu_us_per_req": 10.0}
    # 30 + 10 + 10 µs of CPU per request on 2 cores: 40 000 req/s
    assert bound.combined_rps(frontend, 10.0, cores=2) == pytest.approx(40_000)
    assert bound.combined_rps(frontend, 10.0, cores=1) == pytest.approx(20_000)


def test_summary_takes_medians_of_the_rounds_and_of_their_fractions() -> None:
    def rnd(fb: float, combined: float, ts: float, peer: float) -> dict:
        return {"frontend_bound": {"rps": fb, "server_cpu_us_per_req": 20.0}, "bare_loop": {"worker_cpu_us_per_req": 5.0},
                "combined_rps": combined, "tserve": {"rps": ts, "server_cpu_us_per_req": 50.0},
                "torchserve-quiet": {"rps": peer, "server_cpu_us_per_req": 150.0}}

    out = bound.summarize([rnd(30, 20, 10, 5), rnd(40, 20, 16, 4), rnd(20, 10, 9, 3)],
                          ["tserve", "torchserve-quiet"])
    assert out["combined_rps"] == 20 and out["frontend_bound_rps"] == 30
    assert out["tserve"]["of_combined"] == 0.8  # median of 0.5, 0.8, 0.9
    assert out["tserve_vs_torchserve"] == 3.0  # median of 2, 4, 3
    assert out["tserve"]["bound_cpu_share"] == 0.5  # (20 + 5) / 50
    assert "| tserve | 10 | 50.0 | 0.8 | 0.4 | 0.5 |" in "\n".join(bound.render(out))


def test_tserve_with_torchserves_quiet_logging_gets_its_own_row_and_ratio() -> None:
    def rnd(ts_quiet: float, peer: float) -> dict:
        return {"frontend_bound": {"rps": 40, "server_cpu_us_per_req": 20.0}, "bare_loop": {"worker_cpu_us_per_req": 5.0},
                "combined_rps": 20, "tserve-quiet": {"rps": ts_quiet, "server_cpu_us_per_req": 25.0},
                "torchserve-quiet": {"rps": peer, "server_cpu_us_per_req": 100.0}}

    out = bound.summarize([rnd(12, 4), rnd(10, 2), rnd(9, 3)], ["tserve-quiet", "torchserve-quiet"])
    assert out["tserve_quiet_vs_torchserve"] == 3.0  # median of 3, 5, 3
    assert "tserve_vs_torchserve" not in out
    text = "\n".join(bound.render(out))
    assert "| tserve-quiet | 10 | 25.0 | 0.5 | 0.25 | 1.0 |" in text
    assert "tserve-quiet / TorchServe (both with TorchServe-quiet's log4j2.xml) in the same rounds: 3.0" in text
    assert "tserve-quiet" in servers.kinds() and "--log-config" in servers.kinds()["tserve-quiet"].extra_args


@pytest.mark.slow
def test_the_frontend_bound_server_answers_a_post_with_its_fixed_body(tmp_path, monkeypatch) -> None:
    if not JAR.is_file():
        pytest.fail(f"{JAR} is missing: build it first (gradle --offline packageJar)")
    monkeypatch.setattr(bound, "CLASSES", tmp_path / "classes")
    with bound.BoundServer(JAR) as srv:
        status, body = servers.http_request(srv.port, "POST", bound.PATH, b"hello", timeout=10)
    assert (status, body) == (200, b"x")


def test_a_base_tree_kind_runs_another_checkout_for_a_same_run_ab(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TSERVE_BASE_TREE", raising=False)
    assert "tserve-base" not in servers.kinds()
    monkeypatch.setenv("TSERVE_BASE_TREE", str(tmp_path))
    with pytest.raises(servers.ServerError, match="no ts/frontend/tserve-frontend.jar there; build it first"):
        servers.kinds()
    (tmp_path / "ts" / "frontend").mkdir(parents=True)
    (tmp_path / "ts" / "frontend" / "tserve-frontend.jar").write_bytes(b"PK")
    kind = servers.kinds()["tserve-base"]
    assert kind.env["PYTHONPATH"] == f"{tmp_path}:{tmp_path / 'model-archiver'}"
