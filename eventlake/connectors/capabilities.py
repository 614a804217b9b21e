"""What a connector declares about itself: the delivery guarantee of an output or target,
the trigger kinds it runs under and, per kind, what else it supports. Checked when a
connector class is defined; read by the validation rules, expectations, verify and
``eventlake connectors``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eventlake.errors import StrEnum
from eventlake.triggers import is_micro_batch, is_real_time


class Guarantee(StrEnum):
    """What a replayed batch (after a crash or a retry) does to an output."""

    #: A replay writes nothing new: every record is in the output once.
    EXACTLY_ONCE = "exactly-once"
    #: A replay writes its records again: none is lost, some may be duplicated.
    AT_LEAST_ONCE = "at-least-once"
    #: No promise across restarts (debugging outputs).
    NONE = "none"

    @property
    def strength(self) -> int:
        return {Guarantee.NONE: 0, Guarantee.AT_LEAST_ONCE: 1, Guarantee.EXACTLY_ONCE: 2}[self]

    def covers(self, required: Guarantee) -> bool:
        """True when this guarantee is at least as strong as ``required``."""
        return self.strength >= required.strength

    @classmethod
    def weakest(cls, guarantees: Iterable[Guarantee]) -> Guarantee:
        return min(guarantees, key=lambda g: g.strength, default=cls.EXACTLY_ONCE)


class TriggerKind(StrEnum):
    """How a query's trigger runs it: what a connector may declare it supports."""

    #: Batches with offsets fixed before they run (processing time, available-now, once).
    MICRO_BATCH = "micro-batch"
    #: Spark's continuous processing.
    CONTINUOUS = "continuous"
    #: Spark's real-time mode.
    REAL_TIME = "real-time"

    @classmethod
    def of(cls, trigger: str) -> TriggerKind:
        if is_real_time(trigger):
            return cls.REAL_TIME
        return cls.MICRO_BATCH if is_micro_batch(trigger) else cls.CONTINUOUS


MICRO_BATCH_ONLY = frozenset({TriggerKind.MICRO_BATCH})
OUTPUT_MODES = frozenset({"append", "update", "complete"})


@dataclass(frozen=True, kw_only=True)
class InputCapabilities:
    """What an input supports; rules, verify and the lateness report read these."""

    #: The checkpoint records what each batch read, so a batch replays exactly.
    replayable: bool = True
    triggers: frozenset[TriggerKind] = MICRO_BATCH_ONLY
    #: ``read_batch`` gives everything it holds now (``eventlake lateness``).
    batch_read: bool = False
    #: ``verify`` can replay its batches by the offsets its checkpoint logged.
    verify: bool = False
    #: ``idle_timeout`` heartbeats can tell when it is caught up and quiet.
    idle_heartbeats: bool = False
    #: ``max_offsets_per_trigger`` bounds its batches (EL-W rule on unbounded backlogs).
    offset_limits: bool = False
    #: Retention can remove records before they are read (``fail_on_data_loss`` applies).
    retention_loss: bool = False


@dataclass(frozen=True, kw_only=True)
class OutputCapabilities:
    """What an output supports and guarantees; rules and expectations read these."""

    #: What a replayed batch does here.
    guarantee: Guarantee
    #: Output modes it accepts (Spark's names).
    output_modes: frozenset[str] = frozenset({"append"})
    triggers: frozenset[TriggerKind] = MICRO_BATCH_ONLY
    #: It can be split into fan-out targets (:meth:`Output.as_targets`), so rows failing a
    #: quarantine expectation go to a lake table beside it.
    quarantine: bool = False
    #: Rows the flow's watermark drops can be kept in a ``*_late`` table beside it.
    late_rows: bool = True
    #: ``ensure`` only creates the destination, and the writer (a ``BatchFunction``)
    #: waits for it before the first write: when no other flow reads the output, the
    #: flow's query starts while it is created.
    deferred_creation: bool = False

    def __post_init__(self) -> None:
        unknown = self.output_modes - OUTPUT_MODES
        if unknown or not self.output_modes:
            spark = ", ".join(sorted(OUTPUT_MODES))
            raise ValueError(f"output modes {sorted(unknown)}: Spark's are {spark}")
