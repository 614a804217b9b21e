"""Parse JSON text and name, for each bad record, the first rule it breaks.

Bad input is data: a flow keeps the rows whose reason is null and another flow writes the
rest, raw payload and reason, to a quarantine table. Nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from eventlake.config.params import DEFAULT_JSON_DECODER, JsonDecoder
from eventlake.jvm_code import own_class

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from eventlake.watermarks import Watermarking

CORRUPT = "_corrupt_record"
PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
JSON_CLASS = "eventlake.transforms.JsonRecords"
INVALID_JSON = "invalid_json"
NULL_VALUE = "null_value"


def parse_json(
    df: DataFrame,
    schema: str,
    *,
    value: str = "value",
    into: str = "data",
    decoder: JsonDecoder = DEFAULT_JSON_DECODER,
    once: bool = False,
) -> DataFrame:
    """Add struct column ``into`` parsed from JSON text column ``value`` with DDL ``schema``.

    Fields are best declared as STRING and typed afterwards with ``try_cast``, so that a
    wrong type is a reason, not a null. ``<into>._corrupt_record`` holds text that is not
    a JSON object. ``decoder="bytes"`` (the default) is ``from_json`` given each record's
    bytes instead of a reader over them (``JsonRecords.java``, in eventlake's jar): the
    same rows, without a reader's buffer and decoder allocated per record.
    ``decoder="spark"`` is Spark's ``from_json`` itself. ``decoder="arrow"`` (STRING
    fields only) decodes with pyarrow in bulk: faster where the records are JSON objects
    of strings, identical in every row.

    ``once=True`` when a filter will read several fields of the struct, as one on a
    quarantine reason does (:func:`decoded_once`); it costs a plain decode about a fifth
    of its speed (half with ``arrow``), which the filter's copies of the parse outweigh.
    """
    from pyspark.sql import functions as F

    full = f"{schema}, {CORRUPT} STRING"
    if decoder == "bytes":
        source, decoded, helper = df, from_json_bytes(df.sparkSession, F.col(value), full), None
    elif decoder == "spark":
        source, decoded, helper = df, F.from_json(F.col(value), full, PARSE_OPTIONS), None
    elif decoder == "arrow":
        spark_decoded = F.from_json(F.col(value), full, PARSE_OPTIONS)
        source, decoded, helper = _arrow_decoded(df, schema, spark_decoded, value=value, into=into)
    else:
        raise ValueError(f"JSON decoder '{decoder}' is not one of bytes, spark, arrow")
    out = decoded_once(source, decoded, into) if once else source.withColumn(into, decoded)
    return out if helper is None else out.drop(helper)


def from_json_bytes(
    spark: SparkSession, json: Column, schema: str, options: dict[str, str] | None = None
) -> Column:
    """``from_json(json, schema, options)``, each record given to Jackson as its bytes;
    the same rows (EL-JARS-004 without eventlake's jar)."""
    from pyspark.sql.classic.column import Column

    assert spark._jvm is not None
    jvm = spark._jvm
    java_options = jvm.java.util.HashMap()
    for key, text in (PARSE_OPTIONS if options is None else options).items():
        java_options.put(key, text)
    conf = spark.conf
    return Column(
        own_class(jvm, JSON_CLASS).column(
            json._jc,
            jvm.org.apache.spark.sql.types.StructType.fromDDL(schema),
            java_options,
            conf.get("spark.sql.session.timeZone"),
            conf.get("spark.sql.columnNameOfCorruptRecord"),
        )
    )


def quoted(name: str) -> str:
    """``name`` as one identifier in Spark SQL and column references (dots, spaces and
    backticks taken literally)."""
    return "`" + name.replace("`", "``") + "`"


def decoded_once(df: DataFrame, decoded: Column, into: str) -> DataFrame:
    """``df`` with column ``into`` = ``decoded``, which each row evaluates once.

    Spark's optimizer pushes a filter below the projection that defines the column and
    writes the column's expression in place of each reference to it: a filter on a reason
    built from eight fields of the struct parsed the JSON nine times a row. The column
    comes out of a generator (one element, exploded) instead, which no filter that reads it
    is pushed below.
    """
    from pyspark.sql import functions as F

    kept = [F.col(quoted(c)) for c in df.columns if c != into]
    return df.select(*kept, F.explode(F.array(decoded)).alias(into))


def _arrow_decoded(
    df: DataFrame, schema: str, spark_decoded: Column, *, value: str, into: str
) -> tuple[DataFrame, Column, str]:
    """``df`` with pyarrow's decode in a helper column, the struct to attach as ``into``
    (pyarrow's, else ``spark_decoded``), and the helper column's name."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructType

    from eventlake.transforms.arrow_json import arrow_decoder

    struct = StructType.fromDDL(schema)
    assert isinstance(struct, StructType)
    names = [f.name for f in struct.fields]
    not_text = [f.name for f in struct.fields if not isinstance(f.dataType, StringType)]
    if not_text:
        raise ValueError(f"the arrow JSON decoder takes STRING fields only, not {not_text}")
    decoded = f"__{into}_arrow"
    fast = F.struct(
        *(F.col(f"{decoded}.f{i}").alias(name) for i, name in enumerate(names)),
        F.lit(None).cast("string").alias(CORRUPT),
    )
    # CaseWhen evaluates from_json only for the rows pyarrow did not claim.
    data = F.when(F.col(f"{decoded}.ok"), fast).otherwise(spark_decoded)
    return df.withColumn(decoded, arrow_decoder(names)(F.col(value))), data, decoded


def first_failure(rules: Sequence[tuple[str, Column]]) -> Column:
    """A column holding the reason of the first rule whose condition is true, else null."""
    from pyspark.sql import functions as F

    expr = None
    for reason, broken in reversed(rules):
        expr = F.when(broken, F.lit(reason)).otherwise(
            expr if expr is not None else F.lit(None).cast("string")
        )
    return expr if expr is not None else F.lit(None).cast("string")


def quarantine_rows(checked: DataFrame, reason: str = "reason") -> DataFrame:
    """The quarantine table's rows: bronze records whose ``reason`` is set, as received
    (raw ``key``/``value`` and Kafka coordinates), with the reason and when. On a stream,
    their count per batch feeds the ``eventlake_quarantined_rows`` metric."""
    from pyspark.sql import functions as F

    from eventlake.monitoring.observed import count_quarantined
    from eventlake.transforms.clock import processing_time

    bad = checked.where(F.col(reason).isNotNull()).select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "kafka_timestamp",
        F.col(reason).alias("reason"),
        processing_time(checked.sparkSession).alias("quarantined_at"),
    )
    return count_quarantined(bad)


def _timestamp(raw: Column) -> Column:
    from pyspark.sql import functions as F

    return F.try_to_timestamp(raw)


def _double(raw: Column) -> Column:
    return raw.try_cast("double")


#: Field kinds :func:`checked_events` types: text as received, or typed with try_cast.
FIELD_TYPES: dict[str, Callable[[Column], Column] | None] = {
    "string": None,
    "timestamp": _timestamp,
    "double": _double,
}


def checked_events(
    records: DataFrame, fields: dict[str, str], *, decoder: JsonDecoder = DEFAULT_JSON_DECODER
) -> DataFrame:
    """Kafka records (``kafka_records`` shape) with each of ``fields`` parsed from the JSON
    value, typed, and ``reason``: the first rule the record breaks, else null.

    ``fields`` maps name to ``string``, ``timestamp`` or ``double``; every field is
    required. Reasons: ``null_value``, ``invalid_json``, then per field in order
    ``missing_<field>`` (absent or null; blank text too) and ``invalid_<field>`` (a value
    that does not convert, "" included). ``decoder``: as :func:`parse_json`'s.
    """
    from pyspark.sql import functions as F

    ddl = ", ".join(f"{quoted(name)} STRING" for name in fields)
    parsed = parse_json(records, ddl, decoder=decoder, once=True)
    d = F.col("data")
    typed: dict[str, Column] = {}
    rules: list[tuple[str, Column]] = [
        (NULL_VALUE, F.col("value").isNull()),
        (INVALID_JSON, d.isNull() | d[CORRUPT].isNotNull()),
    ]
    for name, kind in fields.items():
        if kind not in FIELD_TYPES:
            raise ValueError(f"field kind '{kind}' is not one of {', '.join(FIELD_TYPES)}")
        raw = d[name]
        cast = FIELD_TYPES[kind]
        typed[name] = cast(raw) if cast else raw
        if cast:
            rules.append((f"missing_{name}", raw.isNull()))
            rules.append((f"invalid_{name}", typed[name].isNull()))
        else:
            rules.append((f"missing_{name}", F.coalesce(F.trim(raw), F.lit("")) == ""))
    return parsed.select(
        *(F.col(quoted(c)) for c in records.columns),
        *(col.alias(name) for name, col in typed.items()),
        first_failure(rules).alias("reason"),
    )


def deduplicated_events(
    ctx: Watermarking,
    records: DataFrame,
    fields: dict[str, str],
    *,
    time: str,
    keys: list[str],
    delay: str,
    decoder: JsonDecoder = DEFAULT_JSON_DECODER,
) -> DataFrame:
    """The valid events of :func:`checked_events` (``fields`` plus Kafka ``partition`` and
    ``offset``), watermarked on ``time`` by ``delay`` (``ctx.with_watermark``) and
    de-duplicated by ``keys`` within it. Here Spark drops an event at or behind the
    previous batch's watermark."""
    from pyspark.sql import functions as F

    valid = checked_events(records, fields, decoder=decoder).where(F.col("reason").isNull())
    typed = valid.select(*fields, "partition", "offset")
    return ctx.with_watermark(typed, time, delay).dropDuplicatesWithinWatermark(keys)
