"""The run scope: what a run holds, released when the query stops or the run ends."""

from __future__ import annotations

import threading

from eventlake.scope import RunScope


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
