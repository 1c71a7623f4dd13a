"""The LLM scenario's pure parts: prompts, token counting, percentiles and gaps, the verdict, the
chunked-response reader and the TorchServe handler's request parsing. No servers, no model."""

from __future__ import annotations

import asyncio
import json

import pytest

from benchmarks import llm, llm_alone, llm_bound
from benchmarks.handlers import llm_generate_handler as handler


def test_prompt_list_is_deterministic_and_mixed() -> None:
    a, b = llm.prompt_list(), llm.prompt_list()
    assert a == b and len(a) == llm.N_PROMPTS
    assert llm.prompt_list(seed=1) != a
    words = [len(p.split()) for p, _ in a]
    new = [n for _, n in a]
    assert min(words) >= llm.PROMPT_WORDS[0] and max(words) <= llm.PROMPT_WORDS[1]
    assert max(words) - min(words) > 20  # mixed lengths, not one size
    assert all(llm.NEW_TOKENS[0] <= n <= llm.NEW_TOKENS[1] for n in new) and len(set(new)) > 10


def test_check_room_reads_the_served_context() -> None:
    limit = llm_alone.server_limits()["max_context"]
    llm.check_room([limit - llm.NEW_TOKENS[1]], limit)  # just fits
    with pytest.raises(ValueError, match=f"max_context {limit}"):
        llm.check_room([10, limit - llm.NEW_TOKENS[1] + 1], limit)


def test_request_body_asks_for_exact_counts() -> None:
    doc = json.loads(llm.request_body("hi there", 17, True))
    assert doc == {"prompt": "hi there", "max_new_tokens": 17, "temperature": 0,
                   "ignore_eos": True, "stream": True}


def test_count_tokens_reads_usage_else_trusts_the_request() -> None:
    answer = json.dumps({"text": "abc", "usage": {"prompt_tokens": 4, "completion_tokens": 9}})
    assert llm.count_tokens(answer.encode(), 30) == 9
    assert llm.count_tokens(b"raw streamed text", 30) == 30
    assert llm.count_tokens(b"12", 30) == 30  # text that happens to parse as JSON
    assert llm.count_tokens(b'{"text": "x"}', 5) == 5
    assert llm.count_tokens("é".encode() + b"\xff", 7) == 7  # not even UTF-8


def test_percentile_and_gaps() -> None:
    assert llm.percentile([], 99) is None
    values = [float(v) for v in range(100, 0, -1)]
    assert llm.percentile(values, 50) in (50.0, 51.0) and llm.percentile(values, 99) >= 99.0
    assert llm.percentile([3.0], 99) == 3.0 and llm.percentile([1.0, 9.0, 5.0], 50) == 5.0
    assert llm.gaps([1.0, 1.5, 1.5, 4.0]) == [0.5, 0.0, 2.5]
    assert llm.gaps([2.0]) == [] and llm.gaps([]) == []


def test_summarize_streamed_and_whole_answers() -> None:
    streamed = [llm.Reply(sent=0.0, done=0.5, tokens=3, chunks=[0.1, 0.2, 0.5]),
                llm.Reply(sent=1.0, done=1.4, tokens=2, chunks=[1.2, 1.4]),
                llm.Reply(sent=2.0, done=2.3, tokens=1, chunks=[2.3])]
    s = llm.summarize(streamed, elapsed=2.0, errors=[])
    assert s["tokens"] == 6 and s["tokens_per_s"] == 3.0 and s["requests"] == 3
    assert s["ttft_p50_ms"] == 200.0 and s["ttft_p99_ms"] == 300.0
    assert s["itl_p50_ms"] == 200.0 and s["itl_p99_ms"] == 300.0  # gaps 100, 300, 200 ms
    assert s["chunks_per_token"] == 1.0 and "first_error" not in s
    whole = llm.summarize([llm.Reply(sent=0.0, done=0.8, tokens=16)], 1.0, ["HTTP 503: b''"])
    assert whole["ttft_p99_ms"] == 800.0 and whole["itl_p99_ms"] is None
    assert whole["errors"] == 1 and whole["first_error"].startswith("HTTP 503")


def test_verdict_ratios_and_targets() -> None:
    def cell(tps: float, ttft: float) -> dict:
        return {"tokens_per_s": tps, "ttft_p50_ms": ttft / 2, "ttft_p99_ms": ttft}

    cells = {"tserve": {"c1": cell(50, 10), "c8": {**cell(300, 20), "decode_tokens_per_s": 315},
                        "c32": {**cell(400, 100), "decode_tokens_per_s": 400}},
             llm.PEER: {"c1": cell(25, 100), "c8": cell(100, 100), "c32": cell(200, 200)}}
    v = llm.verdict(cells, {"c8": 450.0, "c32": 450.0})
    assert v["ratios"]["c8"] == {"tokens_per_s": 3.0, "ttft_p50_ms": 0.2, "ttft_p99_ms": 0.2}
    assert v["bound_fraction"] == {"c8": 0.667, "c32": 0.889}
    met = {t["what"]: t["met"] for t in v["targets"]}
    assert met == {"tokens/s c8": True, "tokens/s c32": False, "TTFT p99 c1": True,
                   "TTFT p99 c8": True, "TTFT p99 c32": False,
                   "decode (time not prefilling) / bound c8": False,
                   "decode (time not prefilling) / bound c32": True}
    assert v["decode_fraction"]["c8"] == 0.7
    assert v["decode_fraction"]["c32"] == 0.889
    over = llm.verdict(cells, {"c8": 450.0, "c32": 200.0})["targets"][-1]
    assert over["value"] == 2.0 and over["met"] is None  # a bound below the server: no verdict
    empty = llm.verdict({"tserve": {}, llm.PEER: {}}, {})
    assert not any(t["met"] for t in empty["targets"])


def _read(raw: bytes) -> tuple[int, list[float], bytes]:
    async def go() -> tuple[int, list[float], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await llm._read_reply(reader)

    return asyncio.run(go())


def test_read_reply_times_each_chunk() -> None:
    status, times, body = _read(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n")
    assert (status, body, len(times)) == (200, b"abcde", 2) and times[0] <= times[1]
    status, times, body = _read(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
    assert (status, times, body) == (503, [], b"busy")


def test_generate_handler_parses_requests_and_cuts_rows() -> None:
    body = {"prompt": "Once", "max_new_tokens": 5, "ignore_eos": True, "stream": False}
    want = {"prompt": "Once", "max_new_tokens": 5, "ignore_eos": True}
    assert handler.parse_request({"body": body}) == want
    assert handler.parse_request({"data": json.dumps(body).encode()}) == want
    assert handler.parse_request({"body": bytearray(b"plain prompt")})["prompt"] == "plain prompt"
    assert handler.parse_request({"body": b"{}x"})["max_new_tokens"] == handler.DEFAULT_NEW_TOKENS
    with pytest.raises(ValueError):
        handler.parse_request({"body": {"max_new_tokens": 3}})
    assert handler.cut([5, 6, 2, 7], 3, {2}, ignore_eos=False) == ([5, 6], "stop")
    assert handler.cut([5, 6, 2, 7], 3, {2}, ignore_eos=True) == ([5, 6, 2], "length")
    assert handler.cut([5, 6, 7, 8], 2, {2}, ignore_eos=False) == ([5, 6], "length")


def test_runs_of_one_cell_add_up() -> None:
    total = llm.Run()
    total.add(llm.Run([llm.Reply(0.0, 1.0, 10, [0.5, 1.0])], 2.0, [], 0.2))
    total.add(llm.Run([llm.Reply(0.0, 1.0, 30)], 2.0, ["HTTP 500: b''"], 0.2))
    s = total.summary()
    assert s["tokens"] == 40 and s["tokens_per_s"] == 10.0 and s["requests"] == 2
    assert s["errors"] == 1 and s["client_cpu_share"] == 0.1


@pytest.mark.slow  # runs the engine for seconds: left out of make test-quick
def test_bare_loop_decodes_a_batch(tmp_path, monkeypatch) -> None:
    from ts.testing.tiny_llm import build_model, build_tokenizer

    # loading a model makes torch create its inductor cache dir: keep it in tmp_path
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))

    tok = build_tokenizer()
    build_model(tok).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    bare = llm_bound.BareLoop(tmp_path, llm.prompt_list(n=8), batch=4, steps=3)
    assert bare.measure(0.0) > 0 and bare.measure(0.0, engine_forward=False) > 0
    assert "fast forward" in bare.forward_path  # the tiny Llama: the engine's fast path
    child = llm_bound.BareLoopProcess(tmp_path)  # the same in its own session, as the scenario runs it
    try:
        assert child.forward_path == bare.forward_path
        rates = child.measure(0.0, 4)
        assert len(rates) == 4 and all(rate > 0 for rate in rates)  # engine, HF, alone, in its process
    finally:
        child.close()
    assert child.proc.returncode == 0


def test_each_variant_names_its_kv_cache_in_the_handler_block() -> None:
    import yaml

    plain = yaml.safe_load(llm.TSERVE_CONFIG.read_text())
    for paged, keys in ((True, {"paged_kv_cache": True, "enable_prefix_caching": True}),
                        (False, {"paged_kv_cache": False})):
        config = yaml.safe_load(llm.cache_config(llm.TSERVE_CONFIG.read_text(), paged))
        assert config["handler"] == {**plain["handler"], **keys}
        assert {k: v for k, v in config.items() if k != "handler"} == {
            k: v for k, v in plain.items() if k != "handler"}
    assert llm.archive_name(llm.PAGED) != llm.archive_name("tserve")
    with pytest.raises(ValueError, match="handler"):
        llm.cache_config("minWorkers: 1\n", True)


def test_report_shows_both_engines_and_the_paged_targets() -> None:
    from benchmarks import report

    def cell(tps: float, decode: float | None = None) -> dict:
        c = {"tokens_per_s": tps, "ttft_p50_ms": 5.0, "ttft_p99_ms": 9.0}
        return {**c, "decode_tokens_per_s": decode} if decode else c

    cells = {"tserve": {"c8": cell(300, 380)}, llm.PAGED: {"c8": cell(330, 430)},
             llm.PEER: {"c8": cell(100)}}
    bounds = {"c8": 450.0}
    result = {"settings": {}, "bound": {"engine_alone_fraction": {"c8": 0.97}, "engine_process_fraction": {"c8": 0.93}},
              "servers": cells,
              **llm.verdict(cells, bounds), "paged": llm.verdict(cells, bounds, llm.PAGED, llm.PAGED_BOUND_TARGET)}
    text = "\n".join(report._llm({"llm": result}))
    assert "| rectangle | 8 | 300 " in text and "| paged | 8 | 330 " in text
    assert "| paged alone / bound | paged process / bound |" in text
    assert "| 0.97 | 0.93 |" in next(line for line in text.splitlines() if line.startswith("| paged | 8 |"))
    rectangle = next(line for line in text.splitlines() if line.startswith("| rectangle | 8 |"))
    assert "| 0.97 |" not in rectangle and "| 0.93 |" not in rectangle
    paged = {t["what"]: t for t in result["paged"]["targets"]}
    assert paged["decode (time not prefilling) / bound c8"]["target"] == ">= 0.9"
    assert paged["decode (time not prefilling) / bound c8"]["met"] is True  # 430 / 450 = 0.956
    rect = {t["what"]: t for t in result["targets"]}
    assert rect["decode (time not prefilling) / bound c8"]["met"] is True  # 0.844 >= 0.8


def test_the_engine_alone_runs_the_cells_closed_loop_and_counts_decode_tokens_only() -> None:
    """The paged engine under a closed loop of 3 clients with a tiny model: every step decodes at
    most the clients' rows, finished clients come back (more requests than clients), and the
    decode rate is the decode rows over the time not prefilling."""
    from benchmarks import llm_alone
    from ts.testing import tiny_llm

    tok = tiny_llm.build_tokenizer()
    model = tiny_llm.build_model(tok)
    work = [("one two three", 3), ("four", 2), ("five six seven eight nine", 4)]
    alone = llm_alone.EngineAlone(model, tok, work, max_batch_size=4)
    sent: list[str] = []
    real_add = __import__("ts.llm.engine.generation", fromlist=["GenerationEngine"]).GenerationEngine.add

    def spy(engine, seq_id, *args, **kwargs):
        sent.append(seq_id)
        return real_add(engine, seq_id, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ts.llm.engine.generation.GenerationEngine.add", spy)
        out = alone.measure(0.3, clients=3, warmup_s=0.1)
    assert out["steps"] > 0 and out["decode_tokens_per_s"] > 0
    assert 0 < out["rows_per_step"] <= 3  # never more rows than clients
    assert len(sent) > 3 and len(set(sent)) == len(sent)  # clients came back, each request once


@pytest.mark.slow  # runs the engine for seconds: left out of make test-quick
def test_the_engine_process_runs_the_closed_loop_from_another_process(tmp_path, monkeypatch) -> None:
    """The served engine in its engine process, driven by 3 closed-loop clients: finished clients
    come back (more requests than clients), decode tokens are counted, and nothing is left running
    in the engine process afterwards; close() ends it."""
    from ts.testing import tiny_llm

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    tok = tiny_llm.build_tokenizer()
    tiny_llm.build_model(tok).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    work = [("one two three", 3), ("four", 2), ("five six seven eight nine", 4)]
    driven = llm_alone.EngineProcessAlone(tmp_path, tok, work, max_batch_size=4)
    try:
        assert driven.engine.max_batch_size == 4
        assert driven.engine.max_context == llm_alone.server_limits()["max_context"]  # the served limits
        out = driven.measure(0.3, clients=3, warmup_s=0.1, min_requests=4)  # on a loaded machine 0.3 s may finish none
        assert out["decode_tokens_per_s"] > 0 and out["requests"] > 3
        assert not driven.engine.has_work()  # the clients' last requests were aborted and drained
        again = driven.measure(0.2, clients=2, warmup_s=0.0, min_requests=1)  # the engine process serves the next cell
        assert again["decode_tokens_per_s"] > 0
    finally:
        driven.close()
    assert driven.engine.pid is not None and not driven.engine._process.is_alive()
