from __future__ import annotations

from collections import Counter

from eventlake.demo import DemoSummary, balance


def summary(late: int = 0, **produced: int) -> DemoSummary:
    return DemoSummary(produced=Counter(produced), silver_late_dropped=late)


def test_the_balance_holds_with_the_generators_counts() -> None:
    s = summary(valid=90, duplicate=6, malformed=4)
    assert balance(s, bronze=100, silver=90, quarantined=4).startswith("nothing lost: bronze 100")


def test_the_balance_fails_when_a_record_is_missing() -> None:
    # One valid order lost in silver: bronze - silver - quarantine would have hidden it.
    s = summary(valid=90, duplicate=6, malformed=4)
    text = balance(s, bronze=100, silver=89, quarantined=4)
    assert "does not balance" in text
    assert "+1 record(s) unaccounted for" in text


def test_late_drops_and_a_short_bronze_are_named() -> None:
    s = summary(late=2, valid=90, duplicate=6, malformed=4)
    assert balance(s, bronze=100, silver=88, quarantined=4).startswith("nothing lost")
    text = balance(s, bronze=99, silver=87, quarantined=4)
    assert "bronze holds 99 of the 100 records sent" in text
