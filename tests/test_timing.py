"""aesara_bincount._timing: what the benchmarks measure with (issue 21).

Wall time and the calling thread's CPU time are taken call by call, the
candidates interleaved; a candidate that waits (here: sleeps) shows wall time
but no CPU time, which is what lets a loaded machine's figures be read.
"""
import time

import pytest

from aesara_bincount._timing import interleaved_times, load_average


def test_calls_alternate_one_by_one():
    order = []
    fns = {k: (lambda k=k: order.append(k)) for k in "abc"}
    interleaved_times(fns, one_thread="abc", rounds=2, calls=3, lead_in=False)
    # One call of each in turn, the order rotated each time round (no warm-up
    # calls when calls is given), so that each runs after each of the others.
    assert order == list("abc" "bca" "cab") * 2
    order.clear()
    interleaved_times(fns, one_thread="abc", rounds=1, calls=3)
    # With the lead-in (the default) each timed call follows an untimed one.
    assert order == list("aabbcc" "bbccaa" "ccaabb")


def test_lead_in_times_a_candidate_after_itself():
    # A candidate that pays 4 ms of CPU time when another candidate ran just
    # before it (as an output allocated into a block another candidate left
    # cold would), and nothing after itself.
    last = []

    def spin_unless_after_itself():
        if last and last[-1] != "a":
            t = time.thread_time()
            while time.thread_time() - t < 0.004:
                pass
        last.append("a")

    fns = {"a": spin_unless_after_itself, "b": lambda: last.append("b")}
    fair = interleaved_times(fns, one_thread="ab", rounds=1, calls=3)
    assert fair["cpu_ms"]["a"] < 1.0
    coupled = interleaved_times(fns, one_thread="ab", rounds=1, calls=3, lead_in=False)
    assert coupled["cpu_ms"]["a"] >= 3.9


def test_cpu_time_leaves_out_waiting_and_other_threads():
    def sleep():
        time.sleep(0.004)

    def spin():  # 4 ms of this thread's CPU time, however long it waits for a core
        t = time.thread_time()
        while time.thread_time() - t < 0.004:
            pass

    res = interleaved_times({"sleep": sleep, "spin": spin, "omp": sleep}, one_thread=["sleep", "spin"],
                            rounds=2, calls=3)
    assert set(res["ms"]) == {"sleep", "spin", "omp"} and set(res["cpu_ms"]) == {"sleep", "spin"}
    assert res["ms"]["sleep"] >= 3.9 and res["cpu_ms"]["sleep"] < 1.0
    assert res["cpu_ms"]["spin"] >= 3.9 and res["ms"]["spin"] >= res["cpu_ms"]["spin"] * 0.99


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="rounds"):
        interleaved_times({"a": lambda: None}, rounds=0)
    with pytest.raises(ValueError, match="unknown"):
        interleaved_times({"a": lambda: None}, one_thread=["b"])


def test_load_average_has_three_figures():
    assert len(load_average()) == 3 and all(v >= 0 for v in load_average())
