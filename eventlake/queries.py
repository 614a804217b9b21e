"""Running streaming queries: waiting on them, with errors translated at one boundary."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError, translate

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def describe(query: StreamingQuery) -> str:
    progress = query.lastProgress
    batch = progress.get("batchId") if progress else None
    name = query.name or str(query.id)
    return f"query '{name}'" + (f" (last batch {batch})" if batch is not None else "")


def await_finished(query: StreamingQuery, *, timeout: float | None = None) -> None:
    """Wait for a finite query (``available-now``/``once``) to end; raise if it failed.

    On timeout the query is stopped and EL-QUERY-002 raised.
    """
    try:
        finished = query.awaitTermination(None if timeout is None else max(1, round(timeout)))
    except Exception as exc:
        raise translate(exc, context=describe(query)) from exc
    if finished is False:
        query.stop()
        raise EventlakeError(
            ErrorCode.QUERY_TIMEOUT,
            f"{describe(query)} did not finish within {timeout:.0f}s.",
            expected="an available-now query to end once it has processed its input",
            fix="raise the timeout, or bound each batch (max_offsets_per_trigger)",
        )
    error = query.exception()
    if error is not None:
        raise translate(error, context=describe(query))
