"""streams.py: batches run side by side in threads, each on its share of torch's threads; results
in order, errors raised, the caller's thread count kept; and the Embedder's vectors unchanged."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
import torch

from minibert import Embedder
from minibert.embedding.streams import map_in_streams, stream_threads, streams_pay_off


@pytest.fixture
def two_threads():
    """Two torch threads for the test (the machine may have one), set back afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "threads, items, expected",
    [(1, 10, [1]), (2, 10, [1, 1]), (2, 1, [2]), (3, 10, [1, 1, 1]), (6, 10, [2, 2, 1, 1]), (8, 3, [3, 3, 2]),
     (16, 100, [4, 4, 4, 4]), (2, 0, [2])],
)  # fmt: skip
def test_threads_are_shared_out_among_at_most_max_streams(threads, items, expected):
    shares = stream_threads(threads, items)
    assert shares == expected and sum(shares) == threads


def test_results_come_back_in_item_order_whichever_stream_finishes_first(two_threads):
    def slow_square(item):  # random durations: later items often finish before earlier ones
        time.sleep(random.random() / 200)
        return item * item

    for count in (0, 1, 2, 3, 17, 100):
        assert list(map_in_streams(slow_square, list(range(count)))) == [i * i for i in range(count)]


def test_each_stream_runs_on_its_share_of_threads_and_the_caller_keeps_its_own(two_threads):
    seen = []

    def record(item):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        time.sleep(0.01)  # long enough that both workers take items
        return item

    list(map_in_streams(record, list(range(8))))
    workers = {ident for ident, _ in seen}
    assert len(workers) == 2 and threading.get_ident() not in workers
    assert {threads for _, threads in seen} == {1}
    assert torch.get_num_threads() == 2
    later = []  # a thread started afterwards gets the caller's count, not a worker's
    thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert later == [2]


def test_one_item_or_one_thread_runs_in_the_calling_thread_on_all_threads(two_threads):
    def where(item):
        return threading.get_ident(), torch.get_num_threads()

    assert list(map_in_streams(where, [0])) == [(threading.get_ident(), 2)]
    assert list(map_in_streams(where, [0, 1], streams=1)) == [(threading.get_ident(), 2)] * 2
    torch.set_num_threads(1)
    assert list(map_in_streams(where, [0, 1, 2])) == [(threading.get_ident(), 1)] * 3


def test_an_error_in_a_stream_is_raised_and_the_rest_is_not_run(two_threads):
    calls = []

    def fail_on_first(item):
        calls.append(item)
        if item == 0:
            raise ValueError("item 0 is bad")
        time.sleep(0.01)
        return item

    with pytest.raises(ValueError, match="item 0 is bad"):
        list(map_in_streams(fail_on_first, list(range(100))))
    assert len(calls) <= 5  # item 0, the other stream's, and what was queued ahead: not all 100
    assert torch.get_num_threads() == 2


def test_work_runs_at_most_a_few_items_ahead_of_the_caller(two_threads):
    started = []

    def record(item):
        started.append(item)
        return item

    results = map_in_streams(record, list(range(50)))
    for taken, _ in enumerate(results, start=1):
        time.sleep(0.002)  # a slow consumer: the streams must wait for it, not run to the end
        assert len(started) <= taken + 4  # 2 per stream ahead of the awaited item
    results.close()


def test_a_caller_that_stops_early_stops_the_streams(two_threads):
    started = []

    def record(item):
        started.append(item)
        time.sleep(0.005)
        return item

    results = map_in_streams(record, list(range(100)))
    assert next(results) == 0
    results.close()
    time.sleep(0.05)
    assert len(started) <= 6 and torch.get_num_threads() == 2


@pytest.mark.parametrize(
    "costs, shares, expected",
    [([1] * 8, [1, 1], True),  # even work: the streams gain
     ([2, 1], [1, 1], False),  # the long batch and the short: one stream idles a third of the time
     ([1, 1], [1, 1], True), ([1, 1, 1], [1, 1], False),  # an odd batch at the end idles a stream
     ([1] * 20 + [0.5], [1, 1], True),  # a small remainder after many batches costs little
     ([3, 1, 1, 1], [1, 1], True), ([6, 1, 1, 1, 1], [1, 1], False),  # the long one first: others fill in
     ([2, 2, 1, 1], [2, 2, 1, 1], True),  # a 2-thread stream takes twice the work
     ([2, 2, 1, 1, 1, 1], [2, 2, 1, 1], False),
     ([4, 1], [4], False)],  # one stream: nothing to gain
)  # fmt: skip
def test_streams_run_only_when_the_work_shares_out_evenly(costs, shares, expected):
    assert streams_pay_off(costs, shares) is expected


def test_uneven_items_run_one_after_the_other_on_every_thread(two_threads):
    def where(item):
        return threading.get_ident(), torch.get_num_threads()

    here = (threading.get_ident(), 2)
    assert list(map_in_streams(where, ["long", "short"], costs=[2, 1])) == [here, here]
    assert {result for result in map_in_streams(where, list(range(8)), costs=[1] * 8)} != {here}


@pytest.mark.filterwarnings("ignore:.*were truncated")  # the long ones may pass 256 tokens: fine here
def test_a_server_sized_job_of_mixed_lengths_runs_on_one_stream(minilm_dir, real_texts, two_threads):
    """16 texts of mixed lengths make two batches, the long texts and the short: two streams would
    leave one idle (measured 1.4× slower than one stream); they run in the calling thread."""
    embedder = Embedder.from_pretrained(minilm_dir)
    texts = sorted(real_texts, key=len)
    texts = [" ".join([text] * 4) for text in texts[-6:]] + texts[:10]  # 6 long (about 250 tokens), 10 short
    forward = embedder.model.forward
    calls = []

    def recording_forward(*args, **kwargs):
        calls.append((threading.get_ident(), torch.get_num_threads(), args[0].shape))
        return forward(*args, **kwargs)

    embedder.model.forward = recording_forward
    embedder.embed(texts)
    assert len(calls) == 2, [shape for *_, shape in calls]  # two batches ...
    assert {(ident, threads) for ident, threads, _ in calls} == {(threading.get_ident(), 2)}  # ... one stream


@pytest.mark.filterwarnings("ignore:.*were truncated")  # max_length 64 cuts a few: expected
def test_embedder_runs_its_batches_in_streams_with_the_same_vectors(minilm_dir, real_texts, two_threads):
    embedder = Embedder.from_pretrained(minilm_dir)
    texts = real_texts[:200]
    forward = embedder.model.forward
    calls = []

    def recording_forward(*args, **kwargs):
        calls.append((threading.get_ident(), torch.get_num_threads()))
        return forward(*args, **kwargs)

    embedder.model.forward = recording_forward
    in_streams = embedder.embed(texts, batch_size=1, max_length=64)
    workers = {ident for ident, _ in calls}
    assert len(calls) > 4 and len(workers) == 2 and {threads for _, threads in calls} == {1}
    calls.clear()
    one_stream = embedder.embed(texts, batch_size=1, max_length=64, streams=False)  # an option, no global switch
    assert {ident for ident, _ in calls} == {threading.get_ident()} and {threads for _, threads in calls} == {2}
    difference = float(np.abs(in_streams - one_stream).max())
    print(f"streams vs one stream, {len(texts)} real texts: max |Δ| {difference:.1e}")
    assert difference <= 1e-6
    calls.clear()
    embedder.embed("one short text")  # one batch: the calling thread, every thread
    assert calls == [(threading.get_ident(), 2)]


@pytest.mark.filterwarnings("ignore:.*were truncated")  # max_length 64 cuts a few: expected
def test_an_embed_stopped_midway_leaves_no_stream_computing(minilm_dir, real_texts, two_threads, monkeypatch):
    """An exception while the Embedder collects results (Ctrl-C, a failing progress bar) closes the
    streams at once: nothing queued is computed afterwards for nobody."""
    import minibert.embedding.hidden_states

    embedder = Embedder.from_pretrained(minilm_dir)
    forward = embedder.model.forward
    calls = []

    def slow_forward(*args, **kwargs):
        calls.append(1)
        time.sleep(0.02)
        return forward(*args, **kwargs)

    def stop_after_the_first(results, progress, batches):
        yield next(iter(results))
        raise RuntimeError("stopped by the caller")

    embedder.model.forward = slow_forward
    monkeypatch.setattr(minibert.embedding.hidden_states, "_progress", stop_after_the_first)
    with pytest.raises(RuntimeError, match="stopped by the caller"):
        embedder.embed(real_texts[:200], batch_size=1, max_length=64)
    stopped_at = len(calls)
    time.sleep(0.3)
    assert len(calls) == stopped_at and stopped_at <= 6 and torch.get_num_threads() == 2
