"""Every JSON decoder gives ``from_json``'s rows: the same fields, corrupt-record text and
quarantine reasons, for clean records, hand-picked edge cases, random mutants and bytes
that are not UTF-8."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eventlake.transforms import checked_events, parse_json
from eventlake.transforms.arrow_json import arrow_decoder
from eventlake.transforms.parsing import CORRUPT

pytestmark = pytest.mark.integration

FIELDS = {"event_id": "string", "user_id": "string", "event_time": "timestamp", "amount": "double"}
DDL = ", ".join(f"{name} STRING" for name in FIELDS)
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
CLEAN = (
    '{"event_id": "e%d", "user_id": "u%d", '
    '"event_time": "2026-01-01T00:00:%02dZ", "amount": "%d.5"}'
)

EDGE_CASES = [
    None,
    "",
    " ",
    "not json",
    "[1, 2]",
    '[{"event_id": "in an array"}]',
    '"text"',
    "42",
    "null",
    "{}",
    '{"event_id": null}',
    '{"event_id": 7, "amount": 12.50}',
    '{"event_id": "e", "amount": 1e2}',
    '{"event_id": "e", "amount": -0}',
    '{"event_id": "e", "amount": 123456789012345678901234567890}',
    '{"event_id": "e", "amount": 1e999}',
    '{"event_id": true, "user_id": false}',
    '{"event_id": {"nested": [1, 2]}, "user_id": [3]}',
    '{"event_id": "a", "event_id": "b"}',
    '{"event_id": "a", "other": 1, "other": 2}',
    '{"event_id": "a"}{"event_id": "b"}',
    '{"event_id": "a"} trailing',
    '{"event_id": "a"}   ',
    "{'event_id': 'single quotes'}",
    '{event_id: "unquoted name"}',
    '{"event_id": "a", "x": NaN}',
    '{"event_id": "a", "x": Infinity}',
    '{"event_id": "a", "x": -Infinity}',
    '{"event_id": "a", "x": +1}',
    '{"event_id": "a", "x": 01}',
    '{"event_id": "a", "x": .5}',
    '{"event_id": "a", "x": 0x1F}',
    '{"event_id": "a" /* comment */}',
    '{"event_id": "a",}',
    '{"event_id": "a", "x": [1,]}',
    '{"event_id":\n"two lines"}',
    '{"event_id": "a\\nb\\t\\u00e9\\/\\\\"}',
    '{"event_id": "raw\ttab"}',
    '{"event_id": "\\ud800"}',
    '{"event_id": "\\ud83d\\ude00"}',
    '{"event_id": "\\x41"}',
    '\ufeff{"event_id": "bom"}',
    '\t{"event_id": "leading tab"}',
    '{"EVENT_ID": "upper case"}',
    '{"event_id": "", "user_id": "   ", "event_time": "yesterday", "amount": "lots"}',
    '{"event_id": "e", "user_id": "u", "event_time": "2026-01-01T00:00:00Z", "amount": "-3"}',
    '{"event_id": "' + "x" * 5000 + '"}',
    '{"event_id": "a", "deep": ' + "[" * 200 + "]" * 200 + "}",
]


def _mutants(count: int, seed: int) -> list[str]:
    """Clean records with one character deleted, inserted or replaced at random."""
    rng = random.Random(seed)
    alphabet = "{}[]\":,. \\x0123456789eEnul-+'\t"
    out = []
    for i in range(count):
        text = CLEAN % (i, i % 7, i % 60, i)
        at = rng.randrange(len(text))
        edit = rng.choice(("delete", "insert", "replace"))
        if edit == "delete":
            text = text[:at] + text[at + 1 :]
        elif edit == "insert":
            text = text[:at] + rng.choice(alphabet) + text[at:]
        else:
            text = text[:at] + rng.choice(alphabet) + text[at + 1 :]
        out.append(text)
    return out


def _records(spark: SparkSession, values: list[str | None]) -> DataFrame:
    # Rows of one partition in order, so the decoder sees good and bad rows together.
    rows = [(i, v) for i, v in enumerate(values)]
    return (
        spark.createDataFrame(rows, "id LONG, value STRING")
        .repartition(1)
        .sortWithinPartitions("id")
    )


def _claimed(records: DataFrame) -> set[int]:
    """The ids of the records the pyarrow path decodes itself."""
    decoded = records.select("id", arrow_decoder(list(FIELDS))("value").alias("d"))
    return {r["id"] for r in decoded.where("d.ok").select("id").collect()}


def _collected(df: DataFrame) -> list[tuple[object, ...]]:
    # As text: a mutant's timestamp may lie past the year 9999, beyond Python's datetime.
    as_text = df.select(*(F.col(c).cast("string").alias(c) for c in df.columns))
    return [tuple(r) for r in as_text.orderBy(F.col("id").cast("long")).collect()]


def test_every_decoder_gives_the_same_rows(spark: SparkSession) -> None:
    values: list[str | None] = []
    for i, text in enumerate(EDGE_CASES):
        values += [CLEAN % (i, i, i % 60, i), text]
    values += _mutants(3000, seed=11)
    values += [CLEAN % (i, i % 13, i % 60, i) for i in range(5000)]
    records = _records(spark, values)
    # Small Arrow batches: each gets its own failure budget, so mutants are tried too.
    spark.conf.set(ARROW_BATCH, "40")
    try:
        claimed = _claimed(records)
        spark_rows = _collected(checked_events(records, FIELDS, decoder="spark"))
        arrow_rows = _collected(checked_events(records, FIELDS, decoder="arrow"))
        bytes_rows = _collected(checked_events(records, FIELDS, decoder="bytes"))
        spark_data = _collected(parse_json(records, DDL, decoder="spark").select("id", "data"))
        arrow_data = _collected(parse_json(records, DDL, decoder="arrow").select("id", "data"))
        bytes_data = _collected(parse_json(records, DDL, decoder="bytes").select("id", "data"))
    finally:
        spark.conf.unset(ARROW_BATCH)
    mutants = range(2 * len(EDGE_CASES), 2 * len(EDGE_CASES) + 3000)
    assert claimed >= set(range(len(values) - 5000, len(values)))  # every clean record
    assert 500 < len(claimed & set(mutants)) < 3000  # mutants both ways

    assert len(spark_rows) == len(values)
    mismatches = [
        (values[i], s, a)
        for i, (s, a) in enumerate(zip(spark_rows, arrow_rows, strict=True))
        if s != a
    ]
    assert mismatches == []
    assert bytes_rows == spark_rows

    assert spark_data == arrow_data
    assert bytes_data == spark_data
    # The comparison has teeth: bad records and reasons of several kinds are in it.
    reasons = {row[-1] for row in spark_rows}
    assert {None, "null_value", "invalid_json", "invalid_amount", "missing_event_id"} <= reasons


def test_the_arrow_decoder_claims_clean_records_and_hands_the_rest_to_from_json(
    spark: SparkSession,
) -> None:
    values = ['{"event_id": "e1", "user_id": "u1"}', '{"event_id": 12.50}', "oops", None]
    data = parse_json(_records(spark, values), DDL, decoder="arrow")
    rows = [r["data"] for r in data.orderBy("id").collect()]
    assert _claimed(_records(spark, values)) == {0}
    assert (rows[0]["event_id"], rows[0]["user_id"], rows[0][CORRUPT]) == ("e1", "u1", None)
    assert rows[1]["event_id"] == "12.5"  # from_json's text of the number
    assert rows[2][CORRUPT] == "oops"
    assert rows[3] is None


def test_the_arrow_decoder_takes_string_fields_only(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="STRING fields only"):
        parse_json(_records(spark, ["{}"]), "n INT", decoder="arrow")


#: How each decoder's parse reads in a physical plan.
PARSE_IN_PLAN = {"spark": "from_json(", "arrow": "from_json(", "bytes": "JsonRecords"}


@pytest.mark.parametrize("decoder", ["spark", "arrow", "bytes"])
def test_a_filter_on_the_reason_parses_each_record_once(spark: SparkSession, decoder: str) -> None:
    """Spark's optimizer pushed the filter on ``reason`` below the parse and wrote
    ``from_json`` into it once per field the reason reads: nine parses a record."""
    values = [CLEAN % (i, i, i % 60, i) for i in range(20)] + ["oops", None]
    records = _records(spark, values)
    odd = records.withColumn("odd.`name", F.lit(7))
    parsed = parse_json(odd, DDL, decoder=decoder, once=True)  # type: ignore[arg-type]
    assert parsed.columns == ["id", "value", "odd.`name", "data"]
    checked = checked_events(records, FIELDS, decoder=decoder)  # type: ignore[arg-type]
    valid = checked.where(F.col("reason").isNull())
    bad = checked.where(F.col("reason").isNotNull())
    for frame in (valid, bad):
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert plan.count(PARSE_IN_PLAN[decoder]) == 1, plan
    assert sorted(r["event_id"] for r in valid.collect()) == sorted(f"e{i}" for i in range(20))
    assert sorted(r["reason"] for r in bad.collect()) == ["invalid_json", "null_value"]


@pytest.mark.parametrize("decoder", ["spark", "arrow", "bytes"])
def test_checked_events_takes_names_that_need_quoting(spark: SparkSession, decoder: str) -> None:
    fields = {"user id": "string", "event.time": "timestamp", "amount-usd": "double"}
    values = [
        '{"user id": "u1", "event.time": "2026-01-01T00:00:05Z", "amount-usd": "2.5"}',
        '{"user id": "u2", "event.time": "yesterday", "amount-usd": "3"}',
        '{"user id": " ", "event.time": "2026-01-01T00:00:06Z", "amount-usd": "4"}',
        '{"user id": "u4", "event.time": "2026-01-01T00:00:07Z", "amount-usd": "lots"}',
    ]
    records = _records(spark, values).withColumn("kafka.key", F.concat(F.lit("k"), "id"))

    checked = checked_events(records, fields, decoder=decoder)  # type: ignore[arg-type]

    assert checked.columns == ["id", "value", "kafka.key", *fields, "reason"]
    rows = checked.orderBy("id").collect()
    assert [r["kafka.key"] for r in rows] == ["k0", "k1", "k2", "k3"]
    assert [r["reason"] for r in rows] == [
        None, "invalid_event.time", "missing_user id", "invalid_amount-usd"
    ]  # fmt: skip
    first = checked.where("id = 0").select(
        "`user id`", F.col("`event.time`").cast("string").alias("at"), "`amount-usd`"
    )
    assert [tuple(r) for r in first.collect()] == [("u1", "2026-01-01 00:00:05", 2.5)]


NESTED = (
    "s STRUCT<b: INT, c: ARRAY<STRING>>, m MAP<STRING, INT>, t TIMESTAMP, "
    "d DECIMAL(10, 2), f DOUBLE, flag BOOLEAN, n BIGINT, text STRING"
)


def test_the_bytes_decoder_reads_bytes_as_from_json_reads_text(spark: SparkSession) -> None:
    """Kafka values are bytes: not always UTF-8, sometimes with a byte order mark or in
    UTF-16. Each row, typed fields and corrupt records included, is from_json's."""
    good = (
        '{"s": {"b": 1, "c": ["x", "y"]}, "m": {"k": 2}, "t": "2026-01-01T00:00:01.5Z", '
        '"d": 12.345, "f": 1e-3, "flag": true, "n": 9007199254740993, "text": "caf\u00e9"}'
    )
    values: list[bytes | None] = [
        good.encode(),
        '{"text": "café ünïcödé ✓ 😀"}'.encode(),
        b'{"text": "\xff\xfe broken \xc3", "n": 3}',
        b'{"text": "' + bytes([0xFF, 0xFE, 0xC3]) + b'"}',  # not UTF-8
        b'{"text": "ok", "n": "' + bytes([0xC3, 0x28]) + b'"}',
        bytes([0xEF, 0xBB, 0xBF]) + b'{"text": "utf-8 bom"}',
        '{"text": "utf-16"}'.encode("utf-16-le"),
        '{"text": "utf-16 bom"}'.encode("utf-16"),
        b'\x00{"text": "leading zero"}',
        b'{"text": "zero\x00inside"}',
        b"",
        b"{",
        b"\xff",
        None,
        b'{"s": {"b": "not an int"}, "t": "yesterday", "d": "x", "n": 1.5}',
    ]
    records = (
        spark.createDataFrame(list(enumerate(values)), "id LONG, raw BINARY")
        .withColumn("value", F.col("raw").cast("string"))
        .repartition(1)
        .sortWithinPartitions("id")
    )
    spark_data = _collected(parse_json(records, NESTED, decoder="spark").select("id", "data"))
    bytes_data = _collected(parse_json(records, NESTED, decoder="bytes").select("id", "data"))

    assert bytes_data == spark_data
    by_id = {int(str(i)): data for i, data in spark_data}
    assert "caf\u00e9" in str(by_id[0])
    assert "9007199254740993" in str(by_id[0])
    assert str(by_id[3]).count("\ufffd") == 3  # from_json's reader: U+FFFD for each bad byte
    assert by_id[13] is None
