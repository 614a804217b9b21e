"""Decode JSON objects of string fields with pyarrow's JSON reader, in bulk.

:func:`decode` takes an Arrow array of JSON texts and returns, per row, whether it decoded
and the requested fields. It claims a row only when its answer is certainly the one
Spark's ``from_json`` gives for an all-STRING schema: one JSON object on one line whose
requested fields are strings, null or absent. Anything else (not an object, a number or
object in a requested field, a duplicate key, single quotes, several objects, blank text)
is left undecoded, and :func:`eventlake.transforms.parse_json` hands it to ``from_json``:
both decoders give the same rows and the same quarantine reasons.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

#: Name of the flag field of :func:`decode`'s struct; the fields follow as f0, f1, ...
OK = "ok"
#: Failed rows per call after which the rest of the call's rows are left to ``from_json``.
MAX_FAILURES = 32
_ONE_LINE_OBJECT = r"\A[ \t]*\{[^\r\n]*\z"
_ROW = re.compile(r" in row (\d+)$")


def arrow_decoder(names: list[str]) -> UserDefinedFunctionLike:
    """A Spark Arrow UDF: a JSON text column to :func:`decode`'s struct for ``names``."""
    from pyspark.sql.pandas.functions import arrow_udf

    fields = ", ".join(f"f{i} STRING" for i in range(len(names)))
    wanted = list(names)

    def run(values: pa.Array) -> pa.Array:
        return decode(values, wanted)

    return arrow_udf(run, f"{OK} BOOLEAN, {fields}")  # type: ignore[call-overload, no-any-return]


def result_type(count: int) -> pa.StructType:
    """:func:`decode`'s struct type for ``count`` requested fields."""
    return pa.struct(
        [pa.field(OK, pa.bool_(), nullable=False)]
        + [pa.field(f"f{i}", pa.string()) for i in range(count)]
    )


def decode(values: pa.Array, names: list[str]) -> pa.StructArray:
    """Per row of ``values`` (JSON text): ``ok`` and the string fields ``names`` (as f0..)."""
    if values.type != pa.string():
        values = values.cast(pa.string())
    eligible = _single_line_objects(values)
    schema = pa.schema([pa.field(n, pa.string()) for n in names])
    if eligible.true_count == len(values):  # the usual case: no scattering
        parsed, flags = _parse(values, schema)
        fields = [parsed.column(n).combine_chunks() for n in names]
        return pa.StructArray.from_arrays([flags, *fields], fields=list(result_type(len(names))))
    parsed, flags = _parse(values.filter(eligible), schema)
    # Each row's place among the candidates; null (so null results) for the others.
    place = pc.subtract(pc.cumulative_sum(eligible.cast(pa.int64())), 1)
    place = pc.if_else(eligible, place, pa.scalar(None, pa.int64()))
    ok = pc.fill_null(pc.take(flags, place), False)
    fields = [pc.take(parsed.column(n), place).combine_chunks() for n in names]
    return pa.StructArray.from_arrays([ok, *fields], fields=list(result_type(len(names))))


def _single_line_objects(values: pa.Array) -> pa.Array:
    """Rows worth trying: not null, on one line, starting with ``{``."""
    return pc.fill_null(pc.match_substring_regex(values, pattern=_ONE_LINE_OBJECT), False)


def _parse(values: pa.Array, schema: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """``values`` as JSON lines: a table with one row per value (nulls where it failed) and
    an ok flag per value.

    pyarrow names the row a parse failed at; the rows before it are read again and the
    rest after it. Past :data:`MAX_FAILURES` failed rows (data this path does not suit, a
    number in a requested field in every record, say), the rest is left undecoded.
    """
    lines = Lines(values)
    tables: list[pa.Table] = [schema.empty_table()]
    flags: list[pa.Array] = [pa.array([], pa.bool_())]

    def undecoded(count: int) -> None:
        tables.append(pa.table({n: pa.nulls(count, pa.string()) for n in schema.names}))
        flags.append(pa.repeat(pa.scalar(False), count))

    failures = 0
    pending = [(0, len(values))] if len(values) else []
    while pending:
        start, end = pending.pop()
        if failures > MAX_FAILURES:
            undecoded(end - start)
            continue
        table, bad = lines.read(start, end, schema)
        if table is not None:
            tables.append(table)
            flags.append(pa.repeat(pa.scalar(True), end - start))
        elif bad == 0 or end - start == 1:
            failures += 1
            undecoded(1)
            if end - start > 1:
                pending.append((start + 1, end))
        else:
            # Split before the failing row when pyarrow names it, else in half; pop()
            # takes the first part next, keeping the rows in order.
            cut = start + bad if bad is not None and bad < end - start else (start + end) // 2
            pending += [(cut, end), (start, cut)]
    return pa.concat_tables(tables), pa.concat_arrays(flags)


class Lines:
    """``values`` joined into one JSON-lines buffer, read by row ranges without copying."""

    def __init__(self, values: pa.Array) -> None:
        joined = pc.binary_join_element_wise(values, pa.scalar(""), "\n")
        offsets, data = joined.buffers()[1:3]
        self.offsets = np.frombuffer(offsets, dtype=np.int32)[joined.offset :]
        self.data = data

    def read(self, start: int, end: int, schema: pa.Schema) -> tuple[pa.Table | None, int | None]:
        """Rows ``start``..``end`` as a table, or None and the failing row when known."""
        first, last = int(self.offsets[start]), int(self.offsets[end])
        if self.data is None or last == first:
            return None, None
        try:
            table = pj.read_json(
                pa.BufferReader(self.data.slice(first, last - first)),
                read_options=pj.ReadOptions(
                    use_threads=False, block_size=max(1 << 20, last - first)
                ),
                parse_options=pj.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
        except pa.ArrowInvalid as exc:
            found = _ROW.search(str(exc))
            return None, int(found.group(1)) if found else None
        # Two objects on one line read as two rows: the count tells.
        return (table.select(schema.names), None) if len(table) == end - start else (None, None)
