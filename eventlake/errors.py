"""One root exception with stable codes, and the one place Spark/JVM errors are translated.

Every error a user can hit says what happened, what was expected and how to fix it.
"""

from __future__ import annotations

import re
from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable error codes. Never renumber: users grep logs and docs for them."""

    CONFIG_NOT_FOUND = "EL-CONFIG-001"
    CONFIG_INVALID_YAML = "EL-CONFIG-002"
    CONFIG_UNKNOWN_KEY = "EL-CONFIG-003"
    CONFIG_INVALID_VALUE = "EL-CONFIG-004"
    CONFIG_BAD_OVERRIDE = "EL-CONFIG-005"
    CONFIG_MISSING_ENV = "EL-CONFIG-006"
    JARS_MISSING = "EL-JARS-001"
    JAVA_MISSING = "EL-JAVA-001"
    KAFKA_BROKER_START_FAILED = "EL-KAFKA-001"
    KAFKA_PORT_IN_USE = "EL-KAFKA-002"
    KAFKA_UNREACHABLE = "EL-KAFKA-003"
    KAFKA_TOPIC_MISSING = "EL-KAFKA-004"
    KAFKA_ADMIN_FAILED = "EL-KAFKA-005"
    KAFKA_PRODUCE_FAILED = "EL-KAFKA-006"
    PIPELINE_NOT_FOUND = "EL-PIPELINE-001"
    PIPELINE_INVALID = "EL-PIPELINE-002"
    PIPELINE_MODULE = "EL-PIPELINE-003"
    VALIDATION_FAILED = "EL-VALIDATE-001"
    QUERY_FAILED = "EL-QUERY-001"
    QUERY_TIMEOUT = "EL-QUERY-002"
    SPARK_ANALYSIS = "EL-SPARK-001"
    SPARK_ERROR = "EL-SPARK-002"
    POSTGRES_MISSING = "EL-POSTGRES-001"
    POSTGRES_START_FAILED = "EL-POSTGRES-002"
    POSTGRES_UNREACHABLE = "EL-POSTGRES-003"
    POSTGRES_WRITE_FAILED = "EL-POSTGRES-004"
    SINK_WRITE_FAILED = "EL-SINK-001"


class EventlakeError(Exception):
    """Root of every error eventlake raises on purpose."""

    def __init__(
        self,
        code: ErrorCode,
        what: str,
        *,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.code = code
        self.what = what
        self.expected = expected
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        parts = [f"[{self.code}] {self.what}"]
        if self.expected:
            parts.append(f"Expected: {self.expected}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return "\n  ".join(parts)


_JAVA_EXC = re.compile(r"((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?::\s*(.*))?")


def _first_cause_line(text: str) -> str:
    """The innermost 'Caused by' of a JVM trace, or its first line."""
    causes = [line for line in text.splitlines() if line.strip().startswith("Caused by:")]
    line = causes[-1].split("Caused by:", 1)[1] if causes else text.strip().splitlines()[0]
    return line.strip()


def translate(exc: BaseException, *, context: str = "") -> EventlakeError:
    """Turn a Spark, Py4J or JVM exception into an EventlakeError with a fix.

    Already-translated errors pass through unchanged. ``context`` names what was running
    (query, flow, batch) and prefixes the message.
    """
    if isinstance(exc, EventlakeError):
        return exc
    text = str(exc) or type(exc).__name__
    where = f"{context}: " if context else ""
    cause = _first_cause_line(text)

    if "Failed to find data source: kafka" in text or (
        "ClassNotFoundException" in text and ("kafka" in text or "delta" in text)
    ):
        return EventlakeError(
            ErrorCode.JARS_MISSING,
            f"{where}Spark cannot load the Kafka connector or Delta classes ({cause}).",
            expected="the jars resolved by jvm/spark/pom.xml in .cache/jars/spark",
            fix="run `make jars` (or set EVENTLAKE_JARS_DIR to a folder holding them)",
        )
    if "UnknownTopicOrPartition" in text or "does not host this topic-partition" in text:
        return EventlakeError(
            ErrorCode.KAFKA_TOPIC_MISSING,
            f"{where}a Kafka topic the query reads or writes does not exist ({cause}).",
            expected="every topic to exist before the query starts",
            fix="create it: `eventlake kafka create-topic NAME --partitions N`",
        )
    if "TimeoutException" in text and ("kafka" in text.lower()):
        return EventlakeError(
            ErrorCode.KAFKA_UNREACHABLE,
            f"{where}Kafka did not answer in time ({cause}).",
            expected="a reachable broker at kafka.bootstrap_servers",
            fix="check the address, or start one with `eventlake kafka start`",
        )
    name = type(exc).__name__
    if name == "StreamingQueryException":
        return EventlakeError(
            ErrorCode.QUERY_FAILED,
            f"{where}the streaming query failed: {cause}",
            expected="the query to keep running or finish its available input",
            fix="read the cause above; the query restarts from its checkpoint once it is fixed",
        )
    if name == "AnalysisException" or "AnalysisException" in text[:200]:
        return EventlakeError(
            ErrorCode.SPARK_ANALYSIS,
            f"{where}Spark rejected the query plan: {cause}",
            expected="a query Spark can analyse (existing columns, tables and types)",
            fix="correct the transform or table named in the message",
        )
    match = _JAVA_EXC.search(cause)
    detail = f"{match.group(1)}: {match.group(2) or ''}".strip() if match else cause
    return EventlakeError(
        ErrorCode.SPARK_ERROR,
        f"{where}Spark raised {detail}",
        expected="the Spark job to succeed",
        fix="see the driver log for the full trace; rerun with --verbose for Spark's output",
    )
