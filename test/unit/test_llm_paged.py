"""The paged KV cache (ts/llm/engine/paged): the block pool and prefix index alone, then the paged
engine's greedy tokens against Hugging Face's ``generate`` (mixed lengths, a pool so small that
sequences are preempted and recomputed, prompts sharing a 200-token prefix), with the allocator's
invariants checked after every step: no block is lost, and a block is shared between live
sequences only when it is a cached prefix. The fast forward's decode rows read the pool through the
native kernel (``native.py``) where it builds, else through the block gather; the correctness tests
run both (``attention``). The tiny Llama of ts/testing/tiny_llm.py, no downloads.
"""

from __future__ import annotations

import itertools
import json
import logging

import pytest
import torch
from llm_support import (  # noqa: F401 - fixtures
    model_dir_fixture,
    model_fixture,
    one_thread_fixture,
    reference,
    tok_fixture,
    tokens,
)

from ts.llm.engine.paged import hf_cache, native, parts
from ts.llm.engine.paged.pool import BlockPool, BlockTable
from ts.llm.engine.paged.scheduler import PagedKV, paged_engine
from ts.llm.handler.llm_metrics import LLMMetrics
from ts.llm.params import LLMRequestError, SamplingParams

PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog and then",
    "a",
    "Once upon a time there was a little robot who loved to count stars",
    "count: one, two",
    "Streaming sends every token to the client as soon as it is produced. The cache keeps",
]


# ---------------------------------------------------------------------- the pool alone
def test_pool_prefix_hits_share_only_hashed_blocks():
    pool = BlockPool(8, 4)
    a = BlockTable()
    tokens = list(range(10))  # two full blocks and a partial one
    assert pool.match_prefix(tokens, a) == 0
    a.blocks.extend(pool.allocate() for _ in range(3))
    pool.seal_full_blocks(tokens, 10, a)
    assert len(a.hashes) == 2
    b = BlockTable()
    assert pool.match_prefix(tokens[:9] + [99], b) == 8  # both full blocks found
    assert b.blocks == a.blocks[:2]
    pool.check([a, b])
    with pytest.raises(AssertionError, match="not a cached prefix"):
        pool.share(a.blocks[2])  # the partial block is private
    assert pool.stats.hit == 8 and pool.stats.queried == 20


def test_pool_check_catches_a_private_block_in_two_tables():
    pool = BlockPool(4, 4)
    a, b = BlockTable([pool.allocate()]), BlockTable()
    b.blocks.append(a.blocks[0])
    pool.refs[a.blocks[0]] += 1  # as a buggy allocator would
    with pytest.raises(AssertionError, match="not a cached prefix"):
        pool.check([a, b])


def test_pool_lru_eviction_and_switch_off():
    pool = BlockPool(2, 2)
    first, second = BlockTable(), BlockTable()
    for table, toks in ((first, [1, 2, 3]), (second, [5, 6, 7])):
        pool.match_prefix(toks, table)
        table.blocks.append(pool.allocate())
        pool.seal_full_blocks(toks, 2, table)
        pool.release(table)
    assert pool.available == 2
    pool.allocate()  # evicts the least recently used: [1, 2]
    again = BlockTable()
    assert pool.match_prefix([1, 2, 3], again) == 0
    assert pool.match_prefix([5, 6, 7], again) == 2
    with pytest.raises(MemoryError):
        pool.allocate()
    off = BlockPool(2, 2, prefix_caching=False)
    t = BlockTable([off.allocate()])
    off.seal_full_blocks([1, 2, 3], 2, t)
    off.release(t)
    assert off.match_prefix([1, 2, 3], BlockTable()) == 0 and off.available == 2


# ---------------------------------------------------------------------- the engine
@pytest.fixture(params=["native", "gather"], name="attention")
def attention_fixture(request, monkeypatch):
    """The decode attention the paged engines of a test use: the native kernel (required to
    build: a C compiler is part of the test machine) or the block gather (``TS_NATIVE_KERNELS=0``)."""
    if request.param == "native":
        assert native.decode_kernel(torch.device("cpu"), torch.float32) is not None, "the native kernel did not build"
    else:
        monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    return request.param


def check_attention(engine, attention):
    assert engine.forward_path.endswith(f"decode attention {'native' if attention == 'native' else 'gather + SDPA'})")


def drive(engine, arrivals, conversations=None, logprobs=None):
    """Step until idle (arrivals[step] added before that step; ``conversations``: sequence ->
    its stateful conversation; ``logprobs``: SamplingParams' field), checking the pool every step."""
    updates: dict[str, list] = {}
    step = 0
    while any(k >= step for k in arrivals) or engine.has_work():
        for seq_id, ids, n in arrivals.get(step, []):
            engine.add(seq_id, ids, SamplingParams(max_new_tokens=n, ignore_eos=True, logprobs=logprobs))
            if seq_id in (conversations or {}):
                engine.converse(seq_id, conversations[seq_id])
            updates[seq_id] = []
        for u in engine.step():
            updates[u.seq_id].append(u)
        engine.kv.pool.check(engine.kv.live_tables())
        step += 1
        assert step < 3000
    # every block back (some still cached), but those pinned for idle conversations
    assert engine.kv.pool.available + engine.kv.pins.freeable(set()) == engine.kv.pool.num_blocks
    return updates


def test_paged_greedy_equals_generate_mixed_lengths(model, tok, attention):
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    lengths = [5, 20, 8, 3, 16, 12]
    engine = paged_engine(model, tok, block_size=4, max_batch_size=3, max_tokens_per_step=24)
    check_attention(engine, attention)
    got = drive(engine, {2 * i: [(f"s{i}", x, n)] for i, (x, n) in enumerate(zip(ids, lengths, strict=True))})
    for i, (x, n) in enumerate(zip(ids, lengths, strict=True)):
        assert tokens(got[f"s{i}"]) == reference(model, x, n), f"prompt {i}"
        assert got[f"s{i}"][-1].finish_reason == "length"
    assert engine.kv.preemptions == 0


def test_decode_rows_in_width_groups_keep_greedy_tokens(model, tok, monkeypatch):
    """Every decode step split into groups of similar table width (no group cost: the rows'
    widths decide alone) gives the tokens of one group, row by row. The block gather's: the native
    kernel reads each row's own blocks and has no groups."""
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    monkeypatch.setattr(parts, "GROUP_COST_BLOCKS", 0)
    seen = []
    real = parts.width_groups
    monkeypatch.setattr(parts, "width_groups", lambda widths, cost: seen.append(g := real(widths, cost)) or g)
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    engine = paged_engine(model, tok, block_size=4, max_batch_size=6, max_tokens_per_step=256)
    got = drive(engine, {0: [(f"s{i}", x, 12) for i, x in enumerate(ids)]})
    assert any(len(g) > 1 for g in seen)  # the steps did run in several groups
    for i, x in enumerate(ids):
        assert tokens(got[f"s{i}"]) == reference(model, x, 12), f"prompt {i}"


def test_width_groups_split_only_where_padding_costs_more():
    for widths in ([1, 10, 2, 9, 5, 5, 10, 1] * 4, [3, 3, 4], list(range(1, 11)) * 3):
        for cost in (0, 8, 24, 10**6):
            groups = parts.width_groups(widths, cost)
            assert sorted(r for g in groups for r in g) == list(range(len(widths)))  # each row once
            spans = [(min(widths[r] for r in g), max(widths[r] for r in g)) for g in groups]
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # sorted, not overlapping
    assert len(parts.width_groups([3, 3, 4], 24)) == 1       # padding of 2 blocks: not worth a group
    assert len(parts.width_groups([1] * 16 + [10] * 16, 24)) == 2  # 144 padding blocks saved
    assert len(parts.width_groups([1, 10, 2, 9], 10**6)) == 1


def test_paged_preemption_by_recompute_keeps_greedy_tokens(model, tok, attention):
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    # the longest (26 + 24 tokens) needs 13 blocks of 4 alone: the others are preempted around it
    engine = paged_engine(model, tok, num_blocks=14, block_size=4, max_batch_size=4, max_tokens_per_step=64)
    check_attention(engine, attention)
    got = drive(engine, {0: [(f"s{i}", x, 24) for i, x in enumerate(ids)]})
    assert engine.kv.preemptions > 0  # the pool forced some sequences out and back
    for i, x in enumerate(ids):
        assert tokens(got[f"s{i}"]) == reference(model, x, 24), f"prompt {i}"


def test_paged_prefix_hits_reuse_a_200_token_prefix(model, tok, attention):
    prefix = tok(" ".join(PROMPTS * 4))["input_ids"][:200]
    questions = [prefix + tok(q, add_special_tokens=False)["input_ids"] for q in ("count: one", "Hello world")]
    engine = paged_engine(model, tok, block_size=16, max_batch_size=4, max_tokens_per_step=512)
    check_attention(engine, attention)
    got = drive(engine, {0: [("a", questions[0], 8)], 3: [("b", questions[1], 8)]})
    for seq_id, x in zip("ab", questions, strict=True):
        assert tokens(got[seq_id]) == reference(model, x, 8)
    assert engine.kv.prefix_stats.hit == 192  # b found the prefix's 12 full blocks
    together = paged_engine(model, tok, block_size=16, max_batch_size=4, max_tokens_per_step=512)
    got = drive(together, {0: [("a", questions[0], 8), ("b", questions[1], 8)]})
    assert together.kv.prefix_stats.hit == 192  # b waited one step for a's prefix instead of computing it again
    assert tokens(got["b"]) == reference(model, questions[1], 8)
    off = paged_engine(model, tok, block_size=16, prefix_caching=False)
    got = drive(off, {0: [("a", questions[0], 8)], 3: [("b", questions[1], 8)]})
    assert off.kv.prefix_stats.hit == 0 and tokens(got["b"]) == reference(model, questions[1], 8)


def test_paged_cancel_frees_blocks_and_sole_sequence_ends_by_length(model, tok):
    ids = tok(PROMPTS[1])["input_ids"]
    engine = paged_engine(model, tok, num_blocks=6, block_size=4, max_batch_size=2)
    engine.add("x", ids, SamplingParams(max_new_tokens=40, ignore_eos=True))
    engine.add("y", ids, SamplingParams(max_new_tokens=40, ignore_eos=True))
    engine.step()
    assert engine.cancel("y") and not engine.cancel("nope")
    engine.kv.pool.check(engine.kv.live_tables())
    ups = []
    while engine.has_work():
        ups.extend(engine.step())
    final = [u for u in ups if u.seq_id == "x"][-1]
    assert final.finish_reason == "length" and final.completion_tokens == 24 - len(ids) + 1  # 24 cached + the last
    assert engine.kv.pool.available == 6
    with pytest.raises(LLMRequestError, match="kv_cache_blocks"):
        engine.add("z", list(range(1, 40)), SamplingParams())
    engine.add("w", ids, SamplingParams())
    engine.abort_all()
    assert engine.kv.pool.available == 6


def test_paged_through_hugging_face_forward(model, tok):
    """The model's own forward over the paged cache (what tensor-parallel ranks run): the same
    greedy tokens, with preemption and prefix hits."""
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    ids.append(ids[-1][:-2] + tok("count", add_special_tokens=False)["input_ids"])  # shares s5's full blocks
    engine = paged_engine(model, tok, fast_path=False, num_blocks=14, block_size=4, max_batch_size=4,
                         max_tokens_per_step=16)
    assert engine.forward_path.startswith("Hugging Face")
    got = drive(engine, {0: [(f"s{i}", x, 24) for i, x in enumerate(ids[:-1])], 40: [("t", ids[-1], 6)]})
    assert engine.kv.preemptions > 0 and engine.kv.prefix_stats.hit > 0
    for i, x in enumerate(ids[:-1]):
        assert tokens(got[f"s{i}"]) == reference(model, x, 24), f"prompt {i}"
    assert tokens(got["t"]) == reference(model, ids[-1], 6)


def test_a_one_token_prefill_chunk_sees_only_its_own_tokens(model, tok, monkeypatch):
    """A prompt whose first chunk is one token (the step's budget left one) into a block another
    sequence held before: Hugging Face's forward drops its own mask for a single query, so the
    cache's mask must hide the slots the earlier owner left (they once gave wrong tokens)."""
    chunks: list[tuple[int, int]] = []
    prefill = hf_cache.PagedCache.prefill

    def spy(self, blocks, start, n, device):
        chunks.append((start, n))
        return prefill(self, blocks, start, n, device)

    monkeypatch.setattr(hf_cache.PagedCache, "prefill", spy)
    prompts = ["Once upon a time", "a", "the quick brown fox jumps over the lazy dog", "serving large models is"]
    ids = [tok(p)["input_ids"] for p in prompts]
    engine = paged_engine(model, tok, fast_path=False, num_blocks=64, block_size=4, max_batch_size=2,
                         max_tokens_per_step=6)
    got = drive(engine, {step: [(f"s{i}", ids[i], 10)] for i, step in enumerate((0, 1, 8, 11))})
    assert (0, 1) in chunks, chunks  # the scenario: a one-token first chunk
    for i, x in enumerate(ids):
        assert tokens(got[f"s{i}"]) == reference(model, x, 10), f"prompt {i}"


def test_a_conversations_next_turn_finds_the_last_turns_blocks(model, tok):
    """A stateful sequence's turn 2 is turn 1's prompt and outputs plus the new prompt
    (ts/llm/handler/sessions.py): every full block of turn 1, outputs included, comes from the cache."""
    from ts.llm.handler.sessions import SEQUENCE_ID, Conversations

    conv = Conversations(enabled=True)
    engine = paged_engine(model, tok, block_size=4)
    headers = {SEQUENCE_ID: "chat-1"}
    first = conv.prompt("t1", headers, tok(PROMPTS[3])["input_ids"])
    got = drive(engine, {0: [("t1", first, 12)]})
    conv.generated("t1", tokens(got["t1"]))
    conv.finished("t1", completed=True)
    second = conv.prompt("t2", headers, tok(" and then", add_special_tokens=False)["input_ids"])
    before = engine.kv.prefix_stats.hit
    got = drive(engine, {0: [("t2", second, 6)]})
    computed_before = len(first) + 12 - 1  # turn 1's last output token never went through the model
    assert engine.kv.prefix_stats.hit - before == computed_before // 4 * 4
    assert tokens(got["t2"]) == reference(model, second, 6)


def _turn(engine, conv, request_id, sequence, ids, n, pin=True):
    """One completed turn of ``sequence`` (its prompt after the conversation so far); its greedy tokens."""
    from ts.llm.handler.sessions import SEQUENCE_ID

    prompt = conv.prompt(request_id, {SEQUENCE_ID: sequence}, ids)
    got = tokens(drive(engine, {0: [(request_id, prompt, n)]}, {request_id: sequence} if pin else None)[request_id])
    assert got == reference(engine.model, prompt, n)
    conv.generated(request_id, got)
    conv.finished(request_id, completed=True)
    return prompt


@pytest.mark.parametrize("pin", [True, False])
def test_a_conversation_keeps_its_blocks_pinned_through_other_traffic(model, tok, pin):
    """Turn 1 (21 + 12 tokens) leaves 8 full blocks; two other requests of 8 blocks each go
    through the 16-block pool (the second would evict turn 1's blocks). Pinned, turn 2 finds all
    8 blocks and prefills only its new tokens; unpinned (no ``converse``), they were evicted."""
    from ts.llm.handler.sessions import Conversations

    conv = Conversations(enabled=True)
    engine = paged_engine(model, tok, num_blocks=16, block_size=4, max_batch_size=1)
    first = _turn(engine, conv, "t1", "chat", tok(PROMPTS[3])["input_ids"], 12, pin)
    assert engine.kv.pins.blocks() == (8 if pin else 0)
    for i, n in ((1, 14), (5, 6)):  # 31 tokens computed each: 8 blocks
        got = drive(engine, {0: [(f"other{i}", tok(PROMPTS[i])["input_ids"], n)]})
        assert tokens(got[f"other{i}"]) == reference(model, tok(PROMPTS[i])["input_ids"], n)
    before = engine.kv.prefix_stats.hit
    second = _turn(engine, conv, "t2", "chat", tok(" and then", add_special_tokens=False)["input_ids"], 6, pin)
    hit = engine.kv.prefix_stats.hit - before
    if pin:
        assert hit == (len(first) + 12 - 1) // 4 * 4 == 32  # every full block of turn 1: only the new tokens run
        assert engine.kv.pins.blocks() == (len(second) + 6 - 1) // 4  # turn 2's pin replaced turn 1's
        engine.end_conversation("chat")  # SEQUENCE_END
        assert engine.kv.pins.blocks() == 0
    else:
        assert hit < 32
    assert engine.kv.preemptions == 0
    assert engine.kv.pool.available == engine.kv.pool.num_blocks
    engine.kv.pool.check(engine.kv.live_tables())


def test_pinned_idle_conversations_give_way_to_new_requests(model, tok):
    """Two idle conversations pin 14 of 16 blocks. A new prompt needing 5 blocks is admitted by
    unpinning the least recently used conversation (a); then a sequence growing past what is
    left unpins b -- nobody is preempted, nothing fails."""
    from ts.llm.handler.sessions import Conversations

    conv = Conversations(enabled=True)
    engine = paged_engine(model, tok, num_blocks=16, block_size=4, max_batch_size=1)
    _turn(engine, conv, "a1", "a", tok(PROMPTS[3])["input_ids"], 8)  # 28 computed: 7 full blocks
    _turn(engine, conv, "b1", "b", tok(PROMPTS[5])["input_ids"], 4)  # 29 computed: 7 full blocks
    assert engine.kv.pins.blocks() == 14 and engine.kv.pool.available == 2
    x = tok(PROMPTS[1])["input_ids"]  # 18 tokens: 5 blocks
    got = drive(engine, {0: [("x", x, 8)]})
    assert tokens(got["x"]) == reference(model, x, 8)
    assert [len(t.blocks) for t in engine.kv.pins.tables()] == [7]  # a gave way, b kept its blocks
    y = tok(PROMPTS[4])["input_ids"]  # 7 tokens growing to 46: 12 blocks, more than the 9 unpinned
    got = drive(engine, {0: [("y", y, 40)]})
    assert tokens(got["y"]) == reference(model, y, 40)
    assert engine.kv.pins.blocks() == 0 and engine.kv.preemptions == 0
    assert engine.kv.pool.available == engine.kv.pool.num_blocks


def test_bytes_per_block_is_the_storage_tensors_size(model, tok):
    from ts.llm.engine.paged.budget import blocks_in_budget, bytes_per_block

    engine = paged_engine(model, tok, num_blocks=10, block_size=4)
    drive(engine, {0: [("s", tok(PROMPTS[0])["input_ids"], 2)]})  # the first write makes the tensors
    real = sum(t.nbytes for t in (*engine.kv.storage.keys, *engine.kv.storage.values))
    per_block = bytes_per_block(model.config, engine.state.num_layers, 4, model.dtype)
    assert per_block * 10 == real
    assert bytes_per_block(model.config, engine.state.num_layers, 4, model.dtype, tp_size=2) * 2 == per_block
    assert bytes_per_block(model.config, engine.state.num_layers, 4, torch.bfloat16) * 2 == per_block
    assert blocks_in_budget(0.5, 10 * per_block + 7, per_block) == 5


def test_available_memory_without_psutil_reads_proc_meminfo(monkeypatch):
    import sys

    from ts.llm.engine.paged.budget import available_bytes

    with_psutil = available_bytes(torch.device("cpu"))
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil now raises ImportError
    assert 0.5 < available_bytes(torch.device("cpu")) / with_psutil < 2


class _Metric:
    def __init__(self, recorded: dict[str, float], name: str) -> None:
        self.recorded, self.name = recorded, name

    def add_or_update(self, value: float, dimension_values: list[str]) -> None:
        self.recorded[self.name] = value


class _Metrics:
    """The handler's metrics cache as LLMMetrics uses it: the last value of each metric."""

    def __init__(self) -> None:
        self.recorded: dict[str, float] = {}

    def add_metric_to_cache(self, name: str, unit: str, dimension_names: list[str], metric_type: object) -> _Metric:
        return _Metric(self.recorded, name)


def test_handler_keys_build_the_paged_engine_and_record_its_metrics(model_dir):
    from ts.context import Context
    from ts.handler_utils.distributed.config import ModelConfigError
    from ts.torch_handler.llm_handler import LLMHandler

    def handler(cfg):
        h = LLMHandler()
        h.initialize(Context("tiny", str(model_dir), {"model": {}}, 4, None, "test", model_yaml_config={"handler": cfg}))
        return h

    with pytest.raises(ModelConfigError, match="handler.block_size needs the paged KV cache, but "
                                               "handler.paged_kv_cache is false: remove block_size"):
        handler({"paged_kv_cache": False, "block_size": 8})
    with pytest.raises(ModelConfigError, match="handler.kv_cache_blocks"):
        handler({"paged_kv_cache": True, "kv_cache_blocks": 0})
    h = handler({"paged_kv_cache": True, "kv_cache_blocks": 40, "block_size": 8, "max_new_tokens": 4})
    assert isinstance(h.engine.kv, PagedKV) and h.engine.kv.pool.num_blocks == 40 and h.engine.kv.pool.block_size == 8
    assert "paged KV cache (40 blocks of 8 tokens, prefix caching on, decode attention native)" in h.engine.forward_path
    h.context.metrics = _Metrics()
    h.llm_metrics = LLMMetrics(h.context.metrics, "tiny")
    for rid in ("a", "b"):  # the same prompt twice: b finds a's full blocks
        h.add_request(rid, b'{"prompt": "Once upon a time there was a little robot who loved to count"}', {})
        while h.has_work():
            h.step()
    assert 0 < h.context.metrics.recorded["llm_prefix_cache_hit_ratio"] < 1
    assert h.context.metrics.recorded["llm_kv_cache_usage_ratio"] == 0  # nothing running: every block is back


def _handler(model_dir, cfg, **yaml):
    from ts.context import Context
    from ts.model_settings import ModelSettings
    from ts.torch_handler.llm_handler import LLMHandler

    # the frontend resolves the model-level keys and sends them in LOAD: the handler reads those
    settings = ModelSettings(**{k: v for k, v in yaml.items() if k in ModelSettings.__dataclass_fields__})
    h = LLMHandler()
    h.initialize(Context("tiny", str(model_dir), {"model": {}}, 4, None, "test",
                         model_yaml_config={"handler": cfg, **yaml}, model_settings=settings))
    return h


def test_kv_cache_memory_fraction_sizes_the_pool(model_dir, model, monkeypatch, caplog):
    """2 layers x 2 (k, v) x 2 kv heads x 16 dims x 8 tokens x 4 bytes = 4096 bytes a block; a
    context of 256 tokens needs 32 blocks of 8."""
    from ts.handler_utils.distributed.config import ModelConfigError
    from ts.llm.engine.paged import budget

    monkeypatch.setattr(budget, "available_bytes", lambda device: 100 * 4096 + 5)
    with caplog.at_level("INFO", logger="ts.torch_handler.llm_handler"):
        h = _handler(model_dir, {"paged_kv_cache": True, "kv_cache_memory_fraction": 0.5, "block_size": 8})
    assert h.engine.kv.pool.num_blocks == 50
    assert "KV cache: 50 blocks of 8 tokens, 4096 bytes per block" in caplog.text
    with pytest.raises(ModelConfigError, match=r"handler.kv_cache_memory_fraction: 0.25 .* gives 25 KV blocks of 8 "
                                                r"tokens, fewer than the 32 .*raise kv_cache_memory_fraction"):
        _handler(model_dir, {"paged_kv_cache": True, "kv_cache_memory_fraction": 0.25, "block_size": 8})
    h = _handler(model_dir, {"paged_kv_cache": True, "kv_cache_memory_fraction": 0.25, "block_size": 8,
                             "max_context": 192})  # 24 blocks: a shorter context fits
    assert h.engine.kv.pool.num_blocks == 25
    with pytest.raises(ModelConfigError, match="handler.kv_cache_blocks and handler.kv_cache_memory_fraction"):
        _handler(model_dir, {"paged_kv_cache": True, "kv_cache_memory_fraction": 0.5, "kv_cache_blocks": 40})
    for bad in (0, 1.5, True, "half"):
        with pytest.raises(ModelConfigError, match="handler.kv_cache_memory_fraction"):
            _handler(model_dir, {"paged_kv_cache": True, "kv_cache_memory_fraction": bad})
    with pytest.raises(ModelConfigError, match="handler.kv_cache_memory_fraction needs the paged KV cache"):
        _handler(model_dir, {"paged_kv_cache": False, "kv_cache_memory_fraction": 0.5})


def test_the_paged_cache_is_the_default_where_the_fast_forward_runs_on_a_cpu(model_dir, monkeypatch, caplog):
    """No paged_kv_cache: the paged cache where it is measured to win (one CPU process, the fast
    forward, the native decode attention); the rectangle with Hugging Face's forward or without the
    kernel; the pool's own keys ask for the paged cache; false keeps the rectangle."""
    from ts.llm.engine.generation import GenerationEngine

    default = _handler(model_dir, {})
    assert isinstance(default.engine.kv, PagedKV)
    assert default.engine.forward_path.startswith("the engine's fast forward")
    assert "paged KV cache (64 blocks of 16 tokens, prefix caching on, decode attention native)" in \
        default.engine.forward_path  # max_batch_size 4 contexts of 256 tokens: the rectangle's memory
    for cfg in ({"fast_path": False}, {"paged_kv_cache": False}):
        h = _handler(model_dir, cfg)
        assert type(h.engine) is GenerationEngine and "paged" not in h.engine.forward_path
    assert isinstance(_handler(model_dir, {"fast_path": False, "kv_cache_blocks": 40}).engine.kv, PagedKV)
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")  # no native kernel: the paged cache would gather
    with caplog.at_level(logging.INFO, logger="ts.torch_handler.llm_handler"):
        assert type(_handler(model_dir, {}).engine) is GenerationEngine
    assert "KV cache: the rectangle batch cache (the paged one is the default on a CPU only with its native" \
        in caplog.text
    assert isinstance(_handler(model_dir, {"paged_kv_cache": True}).engine.kv, PagedKV)


def test_the_paged_cache_serves_more_forks_than_batch_slots_in_turns(model_dir):
    """n above max_batch_size: the rectangle refuses it (its forks copy one prefill's rows), the
    paged cache queues the forks and they share the prompt's cached blocks."""
    h = _handler(model_dir, {"max_new_tokens": 3})
    h.add_request("a", json.dumps({"prompt": "Once upon a time", "n": 6, "temperature": 0}).encode(),
                  {"x-tserve-openai": "completions"})
    finals = []
    while h.has_work():
        finals += [e for e in h.step() if e.final is not None]
    doc = json.loads(finals[0].final)
    assert len(finals) == 1 and [c["index"] for c in doc["choices"]] == list(range(6))
    assert len({c["text"] for c in doc["choices"]}) == 1  # greedy: every fork the same tokens


def test_handler_pins_a_stateful_sequences_blocks_until_its_end(model_dir):
    from ts.llm.handler.sessions import SEQUENCE_ID

    # the engine in this process, to read its pins (served, the engine process: test_llm_sessions.py)
    h = _handler(model_dir, {"paged_kv_cache": True, "kv_cache_blocks": 64, "block_size": 4, "max_new_tokens": 8,
                             "engine_process": False}, sequenceBatching=True, continuousBatching=True)
    pinned = [0]
    for rid, prompt in (("t1", "Once upon a time there was a little robot"), ("t2", " who loved")):
        before = h.engine.kv.prefix_stats.hit
        h.add_request(rid, f'{{"prompt": "{prompt}"}}'.encode(), {SEQUENCE_ID: "chat-9"})
        while h.has_work():
            h.step()
        hit = h.engine.kv.prefix_stats.hit - before
        pinned.append(h.engine.kv.pins.blocks())
    assert pinned[1] > 0 and pinned[2] > pinned[1]  # turn 2's pin (a longer conversation) replaced turn 1's
    assert hit == pinned[1] * h.engine.kv.pool.block_size  # turn 2 found every block turn 1 pinned
    h.end_sequence("chat-9")
    assert h.engine.kv.pins.blocks() == 0 and h.engine.kv.pool.available == h.engine.kv.pool.num_blocks


def test_bfloat16_answers_are_the_same_bits_alone_and_batched(tok, monkeypatch):
    """With ``TS_NATIVE_LINEAR_MAX_ROWS=all`` the fast forward's bfloat16 linears (native_linear.py,
    on a CPU without a bfloat16 GEMM) and decode attention (native.py) compute each row in an order
    that does not depend on the rows beside it, and prompts attend one by one: a prompt's greedy
    tokens, and the log-probabilities they were chosen with to the last bit, are the same served
    alone and among others (prefill steps of 1 to ~70 rows, decode steps of 1 to 6). MKL's float32
    GEMM on the widened weight (``TS_NATIVE_LINEAR_MAX_ROWS=0``) fails this. A wider model than
    the module's, so a step's matmuls run several row tiles and k slices."""
    from ts.llm.engine.fastpath import prepack
    from ts.testing.tiny_llm import build_model

    if prepack.native_bfloat16():
        pytest.skip("this CPU has a bfloat16 GEMM: oneDNN's, whose rounding may depend on the rows")
    monkeypatch.setenv("TS_NATIVE_LINEAR_MAX_ROWS", "all")
    model = build_model(tok, seed=11, hidden_size=512, num_layers=2).to(torch.bfloat16)
    ids = [tok(p)["input_ids"] for p in PROMPTS]

    def served(arrivals):
        engine = paged_engine(model, tok, block_size=4, max_batch_size=8, max_tokens_per_step=256)
        assert "native kernel" in engine.runner.fast_forward.linear_form
        return {seq: [(lp.token, lp.logprob) for u in updates for lp in u.logprobs]
                for seq, updates in drive(engine, arrivals, logprobs=0).items()}

    together = served({0: [(f"s{i}", x, 12) for i, x in enumerate(ids)]})
    for i, x in enumerate(ids):
        assert served({0: [(f"s{i}", x, 12)]}) == {f"s{i}": together[f"s{i}"]}, f"prompt {i}"
