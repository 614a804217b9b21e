"""The run scope: what a run holds, released when the query stops or the run ends."""

from __future__ import annotations

import threading
from typing import Any

from eventlake.scope import BatchMemo, RunScope


class Held:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)


class Frame:
    """Stands in for a DataFrame: the memo only persists and unpersists it."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def persist(self) -> Frame:
        self.log.append(f"persist {self.name}")
        return self

    def unpersist(self) -> None:
        self.log.append(f"unpersist {self.name}")


def test_a_batch_failure_is_taken_once_per_query() -> None:
    run = RunScope()
    error = ValueError("boom")
    run.failures.record("p.a", error)
    assert run.failures.take("p.b") is None
    assert run.failures.take("p.a") is error
    assert run.failures.take("p.a") is None


def test_the_memo_builds_once_per_batch_releases_the_older_and_nests() -> None:
    log: list[str] = []
    memo = BatchMemo()

    def latest(batch: tuple[str, int]) -> Any:
        # One memo's build asking for another (users: latest state from the changes).
        changes = memo.get("p.f", "changes", batch, lambda: Frame(f"changes{batch[1]}", log))
        return Frame(f"latest{batch[1]}-of-{changes.name}", log)

    first = memo.get("p.f", "latest", ("s", 1), lambda: latest(("s", 1)))
    again = memo.get("p.f", "latest", ("s", 1), lambda: Frame("never", log))
    assert again is first
    memo.get("p.f", "latest", ("s", 2), lambda: latest(("s", 2)))
    assert log == [
        "persist changes1",
        "persist latest1-of-changes1",
        "unpersist latest1-of-changes1",
        "unpersist changes1",
        "persist changes2",
        "persist latest2-of-changes2",
    ]
    memo.close()
    assert log[-2:] == ["unpersist latest2-of-changes2", "unpersist changes2"]


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
