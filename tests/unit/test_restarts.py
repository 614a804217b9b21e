"""Restart strategies, applied to one flow's failures, and which errors restart at all."""

from __future__ import annotations

import random

import pytest

from eventlake.config import RestartSettings
from eventlake.errors import CODES, ErrorCode, EventlakeError, Recovery, recovery_of
from eventlake.pipelines.restarts import RestartPolicy


def _delays(policy: RestartPolicy, times: list[float]) -> list[float | None]:
    return [policy.next_delay(t) for t in times]


def test_exponential_delay_grows_by_the_multiplier_up_to_the_cap() -> None:
    s = RestartSettings(initial_delay="1 second", multiplier=2.0, max_delay="5 seconds",
                        jitter=0.0)  # fmt: skip
    assert _delays(RestartPolicy(s), [0, 1, 3, 7, 12, 17]) == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_jitter_spreads_each_delay_within_its_bound() -> None:
    s = RestartSettings(initial_delay="10 seconds", multiplier=1.0, jitter=0.1)
    policy = RestartPolicy(s, rng=random.Random(7))
    delays = [d for d in _delays(policy, [i * 20.0 for i in range(50)]) if d is not None]
    assert all(9.0 <= d <= 11.0 for d in delays)
    assert len(set(delays)) > 40  # spread, not one value


def test_a_stable_period_resets_the_backoff() -> None:
    s = RestartSettings(initial_delay="1 second", multiplier=2.0, jitter=0.0,
                        reset_after="1 minute")  # fmt: skip
    policy = RestartPolicy(s)
    assert _delays(policy, [0, 1, 3]) == [1.0, 2.0, 4.0]
    # Restarted at 7 s, then ran for more than a minute without failing.
    assert policy.next_delay(100.0) == 1.0
    assert policy.restarts == 4


def test_attempts_bound_restarts_in_a_row_and_finite_triggers_have_their_own() -> None:
    s = RestartSettings(strategy="fixed-delay", delay="2 seconds", attempts=2)
    assert _delays(RestartPolicy(s), [0, 1, 2]) == [2.0, 2.0, None]
    unlimited = RestartSettings(initial_delay="1 second", jitter=0.0, finite_attempts=3)
    assert RestartPolicy(unlimited).budget is None
    finite = RestartPolicy(unlimited, finite=True)
    assert [d is not None for d in _delays(finite, [0, 10, 20, 30])] == [True] * 3 + [False]


def test_failure_rate_gives_up_past_its_rate() -> None:
    s = RestartSettings(strategy="failure-rate", delay="1 second", failures_per_interval=2,
                        failure_interval="1 minute")  # fmt: skip
    policy = RestartPolicy(s)
    assert _delays(policy, [0, 10, 100, 110]) == [1.0, 1.0, 1.0, 1.0]  # 2 per minute at most
    assert policy.next_delay(115) is None  # a third within the minute


def test_none_never_restarts() -> None:
    assert RestartPolicy(RestartSettings(strategy="none")).next_delay(0) is None


@pytest.mark.parametrize(
    ("code", "recovery"),
    [
        (ErrorCode.CONFIG_INVALID_VALUE, Recovery.FATAL),
        (ErrorCode.VALIDATION_FAILED, Recovery.FATAL),
        (ErrorCode.EXPECTATION_FAILED, Recovery.FATAL),
        (ErrorCode.KAFKA_UNREACHABLE, Recovery.TRANSIENT),
        (ErrorCode.POSTGRES_UNREACHABLE, Recovery.TRANSIENT),
        (ErrorCode.STORAGE_UNAVAILABLE, Recovery.TRANSIENT),
        (ErrorCode.QUERY_FAILED, Recovery.UNKNOWN),
        (ErrorCode.SINK_WRITE_FAILED, Recovery.UNKNOWN),
    ],
)
def test_each_code_says_whether_a_failed_flow_restarts(code: str, recovery: Recovery) -> None:
    assert CODES[code].recovery is recovery
    assert EventlakeError(code, "x").recovery is recovery


def test_a_wrapped_cause_decides_the_recovery() -> None:
    import psycopg

    lost = psycopg.OperationalError("server closed the connection unexpectedly")
    assert recovery_of(lost) is Recovery.TRANSIENT
    wrapped = RuntimeError("the batch failed")
    wrapped.__cause__ = lost
    assert recovery_of(wrapped) is Recovery.TRANSIENT
    assert recovery_of(ValueError("a bug")) is Recovery.UNKNOWN
    # What a stopping server sends to an open connection is a subclass, by SQLSTATE.
    stopping = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    assert recovery_of(stopping) is Recovery.TRANSIENT
    assert recovery_of(psycopg.errors.UniqueViolation("dup")) is Recovery.UNKNOWN


def test_readme_lists_every_fatal_and_transient_code() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text.split("## Faults and restarts", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().split(":")[0]: line for line in section.splitlines()
            if line.startswith("| fatal") or line.startswith("| transient")}  # fmt: skip

    def listed(row: str) -> set[str]:
        codes = set()
        for first, last in re.findall(r"`(EL-[A-Z]+-\d+)`(?:\.\.\.`(\d+)`)?", row):
            prefix, number = first.rsplit("-", 1)
            end = int(last) if last else int(number)
            codes |= {f"{prefix}-{n:03d}" for n in range(int(number), end + 1)}
        return codes

    for recovery in (Recovery.FATAL, Recovery.TRANSIENT):
        table = {c for c, entry in CODES.items() if entry.recovery is recovery}
        assert listed(rows[str(recovery)].split("|")[2]) == table, recovery
