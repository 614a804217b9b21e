"""The run scope: what a run holds, released when the query stops or the run ends."""

from __future__ import annotations

import threading
import time

import pytest

from eventlake.scope import CREATE_THREADS, DueWork, OutputCreation, RunScope


class Held:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)


def test_a_batch_failure_is_taken_once_per_query() -> None:
    run = RunScope()
    error = ValueError("boom")
    run.failures.record("p.a", error)
    assert run.failures.take("p.b") is None
    assert run.failures.take("p.a") is error
    assert run.failures.take("p.a") is None


def test_resources_close_with_their_query_and_everything_with_the_run() -> None:
    log: list[str] = []
    run = RunScope()
    run.open_resource("p.a", "pg", Held(log, "a-pg"))
    run.open_resource("p.b", "pg", Held(log, "b-pg"))
    run.open_resource("p.a", "pg", Held(log, "a-pg-2"))  # reopened: the first is closed
    assert log == ["a-pg"]
    run.close_resources("p.a")
    assert log == ["a-pg", "a-pg-2"]
    assert run.resource("p.a", "pg") is None
    # A batch written without its output opened opens the resource on first use, once.
    kept = run.held("p.c", "pg", Held, lambda: Held(log, "c-pg"))
    assert run.held("p.c", "pg", Held, lambda: Held(log, "never")) is kept
    run.close_resources("p.c")
    assert log == ["a-pg", "a-pg-2", "c-pg"]
    first = run.service(Held, lambda: Held(log, "service-1"))
    assert run.service(Held, lambda: Held(log, "never")) is first
    run.close()
    run.close()  # a second close does nothing
    assert log == ["a-pg", "a-pg-2", "c-pg", "b-pg", "service-1"]


def test_services_are_created_once_across_threads() -> None:
    run = RunScope()
    made: list[int] = []
    barrier = threading.Barrier(8)

    def make() -> Held:
        made.append(1)
        return Held([], "x")

    def ask() -> None:
        barrier.wait()
        run.service(Held, make)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1]


def test_a_flow_waits_for_its_output_created_on_a_worker() -> None:
    release = threading.Event()
    made: list[str] = []

    def create() -> None:
        assert release.wait(30)
        made.append(threading.current_thread().name)

    creation = OutputCreation()
    creation.submit("p.gold", create)
    assert creation.pending() == ["p.gold"]
    creation.wait("p.other")  # a flow whose output was not handed over does not wait
    waited = threading.Thread(target=creation.wait, args=("p.gold",))
    waited.start()
    waited.join(0.2)
    assert waited.is_alive()
    assert made == []
    release.set()
    waited.join(30)
    assert not waited.is_alive()
    assert len(made) == 1
    assert made[0].startswith(CREATE_THREADS)
    assert creation.pending() == []
    creation.close()
    assert not [t for t in threading.enumerate() if t.name.startswith(CREATE_THREADS)]


def test_a_failed_creation_raises_in_the_batch_and_the_next_batch_tries_it_again() -> None:
    attempts: list[str] = []

    def create() -> None:
        attempts.append(threading.current_thread().name)
        if len(attempts) < 3:
            raise OSError(f"attempt {len(attempts)}")

    creation = OutputCreation()
    creation.submit("p.gold", create)
    with pytest.raises(OSError, match="attempt 1"):
        creation.wait("p.gold")
    assert creation.pending() == ["p.gold"]
    with pytest.raises(OSError, match="attempt 2"):  # tried again, in the waiting thread
        creation.wait("p.gold")
    creation.wait("p.gold")
    assert creation.pending() == []
    assert attempts[0].startswith(CREATE_THREADS)
    assert attempts[1:] == [threading.current_thread().name] * 2
    creation.wait("p.gold")  # created: nothing runs again
    assert len(attempts) == 3
    creation.close()


def test_closing_waits_for_every_creation_handed_over() -> None:
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def slow() -> None:
        started.set()
        assert release.wait(30)
        done.append("slow")

    creation = OutputCreation(workers=1)
    creation.submit("p.slow", slow)
    creation.submit("p.queued", lambda: done.append("queued"))
    assert creation.pending() == ["p.slow", "p.queued"]
    assert started.wait(30)
    closing = threading.Thread(target=creation.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waits for the creation under way
    release.set()
    closing.join(30)
    assert not closing.is_alive()
    assert done == ["slow", "queued"]  # and for the one queued behind it


def test_the_runs_end_raises_a_failed_creation_of_a_flow_that_wrote_nothing() -> None:
    creation = OutputCreation()
    creation.submit("p.fine", lambda: None)
    creation.submit("p.broken", lambda: (_ for _ in ()).throw(OSError("no room")))
    with pytest.raises(OSError, match="no room"):
        creation.wait_all()
    assert creation.pending() == ["p.broken"]
    creation.close()


def test_due_work_rests_as_long_as_its_work_asks_and_a_close_cuts_the_rest_short() -> None:
    done: list[tuple[str, float]] = []
    rests = {"a": 0.5, "b": 60.0, "c": None}

    def work(key: str, _item: None) -> float | None:
        done.append((key, time.monotonic()))
        return rests[key]

    due: DueWork[None] = DueWork("test-due-work", work, drain_seconds=30)
    due.put("a", None)
    due.put("b", None)
    assert due.drain(10)
    [(_, a_at), (_, b_at)] = done
    assert b_at - a_at >= 0.5
    due.put("c", None)  # due while b's rest of a minute goes on
    started = time.monotonic()
    due.close()
    assert time.monotonic() - started < 10
    assert [key for key, _ in done] == ["a", "b", "c"]
