from eventlake.monitoring import FlowTotals
from eventlake.pipelines.runner import caught_up


def test_a_listener_that_saw_batch_0_has_caught_up_with_a_one_batch_run() -> None:
    assert caught_up({"p.f": 0}, {"p.f": FlowTotals(batches=1, last_batch_id=0)})


def test_a_listener_behind_or_without_the_flow_has_not_caught_up() -> None:
    assert not caught_up({"p.f": 1}, {"p.f": FlowTotals(batches=1, last_batch_id=0)})
    assert not caught_up({"p.f": 0}, {"p.f": FlowTotals()})
    assert not caught_up({"p.f": 0}, {})
    assert caught_up({}, {})
