"""A crash injector for exactly-once tests, loaded with ``eventlake run --module``.

Importing this file (``--module .../eventlake/testing/crash.py``) makes the fan-out kill
its own process group right after the target named in :data:`CRASH_AFTER_ENV`
(``<target id>:<batch id>``, e.g. ``merge:silver/users_history:0``) has written that batch,
before Spark records the batch as committed: the moment a replay must be harmless. Without
the variable, importing it changes nothing. Production code never imports it.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

from eventlake.connectors.fanout import BatchHandler

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.connectors import BatchContext, Target

CRASH_AFTER_ENV = "EVENTLAKE_TEST_CRASH_AFTER"
_write_one = BatchHandler.write_one


def _crash() -> None:
    """Die now, with the JVM: the process group when this process leads one."""
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _write_then_crash(
    self: BatchHandler, target: Target, df: DataFrame, batch: BatchContext
) -> None:
    _write_one(self, target, df, batch)
    if os.environ.get(CRASH_AFTER_ENV) == f"{target.target_id(self.ctx)}:{batch.batch_id}":
        _crash()


def install() -> None:
    """Wrap the fan-out's per-target write."""
    BatchHandler.write_one = _write_then_crash  # type: ignore[method-assign]


if os.environ.get(CRASH_AFTER_ENV):
    install()
