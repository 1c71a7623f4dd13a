"""CadencedWait (ts/utils/cadence.py): waiting on a descriptor that turns readable at a pace."""

import os
import threading
import time

import pytest

from ts.utils.cadence import MAX_GAP_S, WINDOW, CadencedWait


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def paced_writer(w: int, count: int, gap_s: float) -> threading.Thread:
    def write() -> None:
        for _ in range(count):
            time.sleep(gap_s)
            os.write(w, b"m")
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_every_paced_message_is_seen_and_the_pace_is_learnt(pipe):
    r, w = pipe
    wait = CadencedWait(margin_s=0.004)  # wide: a loaded test machine wakes its threads late
    writer = paced_writer(w, 30, 0.01)
    seen = 0
    while seen < 30:
        ready = wait.select([r], r, 5.0)
        assert ready == [r], "a message was lost or the wait timed out"
        seen += len(os.read(r, 64))
    writer.join(5)
    assert seen == 30
    assert wait.gap_s is not None and 0.0 < wait.gap_s < MAX_GAP_S
    assert wait.polled > 0  # some arrived while it polled: the writer woke no one for those


def test_without_messages_it_sleeps_until_the_timeout(pipe):
    r, _ = pipe
    wait = CadencedWait()
    assert wait.select([r], r, 0.05) == []
    assert wait.gap_s is None and wait.window() is None and wait.polled == 0


def test_another_descriptor_answers_at_once_and_teaches_no_pace(pipe):
    r, _ = pipe
    other_r, other_w = os.pipe()
    try:
        os.write(other_w, b"x")
        wait = CadencedWait()
        assert wait.select([other_r, r], r, 5.0) == [other_r]
        assert wait.window() is None
    finally:
        os.close(other_r)
        os.close(other_w)


def learn_a_pace(wait: CadencedWait, r: int, w: int) -> None:
    for _ in range(3):  # three arrivals back to back
        os.write(w, b"m")
        wait._seen([r], r)
        os.read(r, 1)
    assert wait.gap_s is not None


def test_a_message_there_on_entry_is_answered_at_once_and_teaches_no_gap(pipe):
    r, w = pipe
    wait = CadencedWait()
    learn_a_pace(wait, r, w)
    gaps = list(wait._gaps)
    os.write(w, b"m")
    assert wait.select([r], r, 5.0) == [r]
    assert list(wait._gaps) == gaps  # it arrived some time before: its gap is unknown


def test_a_broken_pace_is_forgotten(pipe):
    r, w = pipe
    wait = CadencedWait()
    learn_a_pace(wait, r, w)
    time.sleep(MAX_GAP_S * 1.5)  # the engine idled
    writer = paced_writer(w, 1, 0.01)
    assert wait.select([r], r, 5.0) == [r]
    writer.join(5)
    assert wait.gap_s is None  # a gap past MAX_GAP_S: the pace is learnt again


def test_the_pace_is_the_lower_quartile_of_recent_gaps():
    wait = CadencedWait()
    wait._gaps.extend([0.002] * (WINDOW - 4) + [0.009] * 4)  # decode steps, and a few that prefill
    assert wait.gap_s == 0.002
    wait._gaps.extend([0.009] * WINDOW)
    assert wait.gap_s == 0.009


def test_the_poll_window_is_a_quarter_of_a_fast_pace_at_most():
    wait = CadencedWait(margin_s=0.004)
    assert wait.window() is None  # no pace yet
    wait._last = 100.0
    wait._gaps.extend([0.008] * 4)  # a pace of 8 ms: the margin shrinks to an eighth of it
    assert wait.window() == pytest.approx((100.007, 100.009))
    wait._gaps.extend([0.04] * WINDOW)  # a slow pace: the whole margin
    assert wait.window() == pytest.approx((100.036, 100.044))


def test_past_its_window_it_sleeps_until_the_timeout(pipe):
    r, _ = pipe
    wait = CadencedWait(margin_s=0.004)
    wait._gaps.extend([0.008] * 4)
    wait._last = time.monotonic()
    assert wait.select([r], r, 0.2) == []  # nothing came in the window, nor after it
    assert wait.polled == 0
