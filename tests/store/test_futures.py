"""The futures the store hands out (offsetlog.store.futures)."""

import threading

import pytest

from offsetlog.store.futures import failed_future, resolved_future, running_future


def test_a_store_future_cannot_be_cancelled_and_answers_like_a_future():
    fut = running_future()
    assert not fut.cancel() and not fut.cancelled() and not fut.done()
    threading.Timer(0.05, fut.set_result, args=("later",)).start()
    assert fut.result(timeout=10) == "later"  # waits, then the resolved fast path
    assert fut.result() == "later"
    assert resolved_future(5).result() == 5
    assert resolved_future().result() is None


def test_a_failed_store_future_raises_its_error_every_time():
    err = KeyError("x")
    fut = failed_future(err)
    for _ in range(2):
        with pytest.raises(KeyError):
            fut.result()
    assert fut.exception() is err


def test_result_times_out_on_a_pending_store_future():
    from concurrent.futures import TimeoutError as FutureTimeout
    with pytest.raises(FutureTimeout):
        running_future().result(timeout=0.01)
