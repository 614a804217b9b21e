"""One root exception, a subclass per category, stable codes, and the one place Spark and
JVM errors are translated.

Every error a user can hit says what happened, what was expected and how to fix it. The
code table (:data:`CODES`, read from ``resources/codes.yaml``) holds each code's category,
title and default texts; a raise site adds what happened and, where it knows more, a more
precise expectation or fix. Validation findings (``EL-V…`` errors, ``EL-W…`` warnings) are
registered in the same table.
"""

from __future__ import annotations

import errno
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, Enum):
        """Python 3.11's ``enum.StrEnum``: each member is its value, as text too."""

        def __str__(self) -> str:
            return str(self.value)


class Category(StrEnum):
    CONFIG = "config"
    DEFINITION = "pipeline definition"
    CONNECTOR = "connector"
    RUNTIME = "runtime"
    VALIDATION = "validation"


class ErrorCode(StrEnum):
    """Stable error codes. Never renumber: users grep logs and docs for them."""

    CONFIG_NOT_FOUND = "EL-CONFIG-001"
    CONFIG_INVALID_YAML = "EL-CONFIG-002"
    CONFIG_UNKNOWN_KEY = "EL-CONFIG-003"
    CONFIG_INVALID_VALUE = "EL-CONFIG-004"
    CONFIG_BAD_OVERRIDE = "EL-CONFIG-005"
    CONFIG_MISSING_ENV = "EL-CONFIG-006"
    JARS_MISSING = "EL-JARS-001"
    JARS_FETCH_FAILED = "EL-JARS-002"
    CLASS_ARCHIVE_FAILED = "EL-JARS-003"
    JVM_CODE_FAILED = "EL-JARS-004"
    PROJECT_EXISTS = "EL-PROJECT-001"
    JAVA_MISSING = "EL-JAVA-001"
    ALLOCATOR_MISSING = "EL-JAVA-002"
    KAFKA_BROKER_START_FAILED = "EL-KAFKA-001"
    KAFKA_PORT_IN_USE = "EL-KAFKA-002"
    KAFKA_UNREACHABLE = "EL-KAFKA-003"
    KAFKA_TOPIC_MISSING = "EL-KAFKA-004"
    KAFKA_ADMIN_FAILED = "EL-KAFKA-005"
    KAFKA_PRODUCE_FAILED = "EL-KAFKA-006"
    KAFKA_AUTHENTICATION_FAILED = "EL-KAFKA-007"
    KAFKA_CLIENT_CONFIG = "EL-KAFKA-008"
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
    METRICS_PORT_UNAVAILABLE = "EL-MONITOR-001"
    METRICS_UNPROTECTED = "EL-MONITOR-002"
    METRICS_TLS_INVALID = "EL-MONITOR-003"
    CHECKPOINT_MISSING = "EL-CHECKPOINT-001"
    CHECKPOINT_RESET_REFUSED = "EL-CHECKPOINT-002"
    CHECKPOINT_CORRUPT = "EL-CHECKPOINT-003"
    CHECKPOINT_NOT_NEW = "EL-CHECKPOINT-004"
    DELTA_LOG_CORRUPT = "EL-DELTA-001"
    LATENESS_UNAVAILABLE = "EL-LATENESS-001"
    LATENESS_BUSY = "EL-LATENESS-002"
    LATENESS_TIMEOUT = "EL-LATENESS-003"
    TOOLS_MISSING = "EL-TOOLS-001"
    ICEBERG_UNAVAILABLE = "EL-ICEBERG-001"
    EXPECTATION_FAILED = "EL-EXPECT-001"
    CLUSTER_START_FAILED = "EL-CLUSTER-001"
    CLUSTER_PORT_IN_USE = "EL-CLUSTER-002"
    STORAGE_UNAVAILABLE = "EL-STORAGE-001"
    HDFS_START_FAILED = "EL-STORAGE-002"
    STORAGE_FULL = "EL-STORAGE-003"


class Recovery(StrEnum):
    """What a running pipeline does when a flow fails with an error (its restart strategy
    decides the delay and the budget)."""

    #: Stop the run at once, naming the code: restarting cannot help (config, a plan that
    #: cannot run, a failed expectation, data lost under fail_on_data_loss...).
    FATAL = "fatal"
    #: Restart the flow from its checkpoint: the cause passes (a broker or database away).
    TRANSIENT = "transient"
    #: Not known to pass or not: restart within the strategy's attempt budget.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Code:
    """One entry of the code table."""

    code: str
    category: Category
    title: str
    expected: str | None = None
    fix: str | None = None
    #: For validation codes: why the finding matters.
    why: str | None = None
    #: For validation codes: "error" stops a run, "warning" does not (unless --strict).
    severity: str = "error"
    #: What a running pipeline does when a flow fails with this code.
    recovery: Recovery = Recovery.UNKNOWN


def _load_codes() -> dict[str, Code]:
    import yaml

    text = resources.files("eventlake.resources").joinpath("codes.yaml").read_text()
    table: dict[str, dict[str, str]] = yaml.safe_load(text)
    return {
        code: Code(
            code=code,
            category=Category(row["category"]),
            title=row["title"],
            expected=row.get("expected"),
            fix=row.get("fix"),
            why=row.get("why"),
            severity=row.get("severity", "error"),
            recovery=Recovery(row.get("recovery", Recovery.UNKNOWN)),
        )
        for code, row in table.items()
    }


#: The code table, ``eventlake/resources/codes.yaml``: every error and validation code.
CODES: dict[str, Code] = _load_codes()


class EventlakeError(Exception):
    """Root of every error eventlake raises on purpose.

    ``EventlakeError(code, what)`` builds the subclass of the code's category
    (:class:`ConfigError`, :class:`PipelineDefinitionError`, :class:`ConnectorError`,
    :class:`PipelineRuntimeError`), so callers can catch a category.
    """

    category: Category | None = None
    #: What a running pipeline does about it: the code's, unless :func:`translate` found a
    #: cause that decides it (a Delta commit conflict is transient, data loss fatal).
    recovery: Recovery = Recovery.UNKNOWN
    #: Set by :func:`translate`: Spark's error condition and its message parameters.
    spark_condition: str | None = None
    spark_parameters: dict[str, str] | None = None

    def __new__(cls, code: str = "", *args: Any, **kwargs: Any) -> EventlakeError:
        entry = CODES.get(code)
        if cls is EventlakeError and entry is not None:
            cls = _BY_CATEGORY.get(entry.category, EventlakeError)
        return super().__new__(cls)

    def __init__(
        self,
        code: ErrorCode,
        what: str,
        *,
        expected: str | None = None,
        fix: str | None = None,
        recovery: Recovery | None = None,
    ) -> None:
        entry = CODES[code]
        self.code = code
        self.recovery = recovery if recovery is not None else entry.recovery
        self.what = what
        self.expected = expected if expected is not None else entry.expected
        self.fix = fix if fix is not None else entry.fix
        super().__init__(self.render())

    def render(self) -> str:
        """The code, what happened, what was expected and the fix; credentials in URLs
        masked (the CLI masks the config's secret values too)."""
        from eventlake.secrets import mask_text

        parts = [f"[{self.code}] {self.what}"]
        if self.expected:
            parts.append(f"Expected: {self.expected}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return mask_text("\n  ".join(parts))


class ConfigError(EventlakeError):
    """The configuration is missing, malformed or holds a wrong value."""

    category = Category.CONFIG


class PipelineDefinitionError(EventlakeError):
    """A pipeline, flow or module is declared in a way eventlake cannot plan or run."""

    category = Category.DEFINITION


class ConnectorError(EventlakeError):
    """An external system (Kafka, PostgreSQL, a fan-out target) failed or is missing."""

    category = Category.CONNECTOR


class PipelineRuntimeError(EventlakeError):
    """Spark, the JVM or a running query failed."""

    category = Category.RUNTIME


_BY_CATEGORY: dict[Category, type[EventlakeError]] = {
    c.category: c
    for c in (ConfigError, PipelineDefinitionError, ConnectorError, PipelineRuntimeError)
    if c.category is not None
}

# JVM exception classes translated to a code of their own, by type.
_KAFKA_TOPIC_MISSING = ("org.apache.kafka.common.errors.UnknownTopicOrPartitionException",)
_KAFKA_TIMEOUT = ("org.apache.kafka.common.errors.TimeoutException",)
#: Kafka's Java client refused its properties (``kafka.java_properties``).
_KAFKA_CONFIG = ("org.apache.kafka.common.config.ConfigException",)
_CLASS_MISSING = ("java.lang.ClassNotFoundException", "java.lang.NoClassDefFoundError")
#: A filesystem (HDFS NameNode, object store endpoint) that does not answer.
_STORAGE_UNREACHABLE = ("java.net.ConnectException", "java.net.UnknownHostException",
                        "java.net.NoRouteToHostException",
                        "org.apache.hadoop.net.ConnectTimeoutException")  # fmt: skip
_STORAGE_SCHEME = ("org.apache.hadoop.fs.UnsupportedFileSystemException",)
#: A write the filesystem refused for space: the IOException (or Hadoop's FSError around
#: it) carries the operating system's ENOSPC text; Python raises OSError(ENOSPC).
_DISK_FULL_CLASSES = ("java.io.IOException", "org.apache.hadoop.fs.FSError")
_DISK_FULL_TEXT = "No space left on device"
_JARS_CONDITIONS = ("DATA_SOURCE_NOT_FOUND",)
#: A query with no planned batch found files in its checkpoint's offsets, state or commits.
_CHECKPOINT_NOT_NEW = "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"

_RAISED = "USER_RAISED_EXCEPTION"
#: Starts the message of a `fail` expectation's raise_error (eventlake.pipelines.expectations).
FAIL_MARK = "eventlake expectation failed"
_CHANGED_SOURCE = (
    "the Delta table the flow reads had rows updated or deleted, and a Delta stream reads "
    "appends only: declare DeltaInput(..., skip_change_commits=True) to read the appends "
    "and skip those commits, or change_feed=True to read every change"
)
# Fixes for Spark and Delta error conditions anywhere in a failed query's cause chain.
_FIXES = {
    "DELTA_SOURCE_IGNORE_DELETE": _CHANGED_SOURCE,
    "DELTA_SOURCE_TABLE_IGNORE_CHANGES": _CHANGED_SOURCE,
    "DELTA_METADATA_MISMATCH": (
        "the flow's columns differ from the Delta table's: set merge_schema=True on the "
        "output (DeltaOutput, ToDelta) to add the new columns, or select the table's columns"
    ),
    "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE": (
        "the flow's checkpoint resumes the Delta table it reads at a version the table's log "
        "no longer holds (removed after maintenance.log_retention, or beyond "
        "maintenance.log_retention_commits, while the flow was stopped or behind): start the "
        "flow over with `eventlake checkpoint reset PIPELINE.FLOW --yes` (it reads the table "
        "as it is now), and keep the checkpoints of every flow that reads the table under "
        "checkpoints.root, where the table's maintenance keeps what they need"
    ),
}


_PY_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)(: |$)")


@dataclass(frozen=True)
class JvmCause:
    """One link of a JVM exception's cause chain."""

    cls: str
    message: str
    #: Spark's error condition of this throwable (``SparkThrowable.getCondition``).
    condition: str | None = None
    #: The SQLSTATE of a ``java.sql.SQLException`` (JDBC's errors), e.g. ``08006``.
    sql_state: str | None = None


def jvm_causes(exc: BaseException) -> list[JvmCause]:
    """The JVM exception behind ``exc`` and its causes, outermost first (empty if none)."""
    origin = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    return list(_walk(origin))


_INTERRUPTIONS = frozenset({
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
})  # fmt: skip


def interrupted(exc: BaseException) -> bool:
    """Whether a thread interrupt is behind ``exc`` (in its JVM causes, or those of the
    Python exceptions it was raised from): what ``StreamingQuery.stop()`` leaves in a
    query it stops mid-work."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if any(c.cls in _INTERRUPTIONS for c in jvm_causes(link)):
            return True
        link = link.__cause__ or link.__context__
    return False


def _walk(throwable: Any) -> Iterator[JvmCause]:
    seen = 0
    while throwable is not None and seen < 20:
        try:
            name = str(throwable.getClass().getName())
            message = str(throwable.getMessage() or "")
            found = _text_of(throwable, "getCondition")
            state = _text_of(throwable, "getSQLState")
            throwable = throwable.getCause()
        except Exception:  # a dead gateway or a non-JVM object: stop walking
            return
        seen += 1
        yield JvmCause(name, message, found, state)


def _text_of(throwable: Any, getter: str) -> str | None:
    """``throwable.<getter>()`` as text; None when it is empty or the class has no such
    method (``getCondition``: a SparkThrowable's; ``getSQLState``: a SQLException's)."""
    from py4j.protocol import Py4JError

    try:
        found = getattr(throwable, getter)()
    except Py4JError:
        return None
    return str(found) if found else None


def condition(exc: BaseException, causes: list[JvmCause] | None = None) -> str | None:
    """Spark's error condition of ``exc`` (``getCondition()``), or of its JVM cause
    (``causes``: ``jvm_causes(exc)`` when the caller has them)."""
    get = getattr(exc, "getCondition", None)
    found = get() if callable(get) else None
    if found:
        return str(found)
    for cause in jvm_causes(exc) if causes is None else causes:
        if cause.message.startswith("[") and "]" in cause.message:
            return cause.message[1 : cause.message.index("]")]
    return None


def describe(exc: BaseException) -> str:
    """One line saying what failed: the innermost JVM cause of ``exc`` as ``class:
    message`` (py4j's own text only names the call), else ``exc``'s first line."""
    return _summary(exc, jvm_causes(exc))


def _summary(exc: BaseException, causes: list[JvmCause]) -> str:
    text = _describe(causes[-1]) if causes else (str(exc).strip() or type(exc).__name__)
    return text.splitlines()[0]


def _describe(cause: JvmCause) -> str:
    """``class: message``; for a Python worker's error, the traceback's last line."""
    lines = [line.strip() for line in cause.message.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in cause.message and lines:
        raised = [line for line in lines if _PY_EXCEPTION_LINE.match(line)]
        return raised[-1] if raised else lines[-1]
    return f"{cause.cls}: {lines[0] if lines else ''}".rstrip(": ")


def translate(exc: BaseException, *, context: str = "", in_query: bool = False) -> EventlakeError:
    """Turn a Spark, Py4J or JVM exception into an EventlakeError with a fix.

    Decided by type: pyspark's exception class, Spark's error condition and the classes in
    the JVM cause chain; never by searching message text. Already-translated errors pass
    through unchanged. ``context`` names what was running (query, flow, batch);
    ``in_query``: ``exc`` ended a running streaming query (raised in its batch function),
    so what has no more specific code is EL-QUERY-001, as a query's own failure is.
    """
    if isinstance(exc, EventlakeError):
        return exc
    causes = jvm_causes(exc)  # each link is several py4j calls: walked once
    cond = condition(exc, causes)
    error = _translate(exc, causes, cond, context, in_query)
    decided = recovery_of(exc, causes)
    if decided is not Recovery.UNKNOWN:
        error.recovery = decided
    error.spark_condition = cond
    get = getattr(exc, "getMessageParameters", None)
    params = get() if callable(get) else None
    error.spark_parameters = dict(params) if params else None
    return error


# Causes that decide whether a failed flow can be restarted, by JVM class or Spark
# condition (prefix) anywhere in the cause chain; the first found decides.
_TRANSIENT_CLASSES = (
    # A broker away, a leader moving, a request timing out: Kafka's retriable errors.
    "org.apache.kafka.common.errors.TimeoutException",
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException",
    "org.apache.kafka.common.errors.DisconnectException",
    "org.apache.kafka.common.errors.NetworkException",
    "org.apache.kafka.common.errors.NotEnoughReplicasException",
    "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
    # Another writer committed first: the batch is retried on the new version.
    "io.delta.exceptions.ConcurrentAppendException",
    "io.delta.exceptions.ConcurrentWriteException",
    "io.delta.exceptions.ConcurrentDeleteReadException",
    "io.delta.exceptions.ConcurrentTransactionException",
    "io.delta.exceptions.MetadataChangedException",
    *_STORAGE_UNREACHABLE,
)
#: A Kafka client refusing its own properties: restarting cannot change them.
_FATAL_CLASSES = _KAFKA_CONFIG
_FATAL_CONDITIONS = (
    "KAFKA_DATA_LOSS",  # offsets gone under failOnDataLoss: restarting loses them again
    "DELTA_METADATA_MISMATCH",  # the sink refuses the schema
    "DELTA_SOURCE_IGNORE_DELETE",
    "DELTA_SOURCE_TABLE_IGNORE_CHANGES",
    "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE",  # the log is gone: it stays gone
)
_TRANSIENT_CONDITIONS = ("DELTA_CONCURRENT",)


_PSYCOPG_TRANSIENT = ("OperationalError", "InterfaceError")


def _disk_full(exc: BaseException, causes: list[JvmCause]) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return any(c.cls in _DISK_FULL_CLASSES and _DISK_FULL_TEXT in c.message for c in causes)


def recovery_of(exc: BaseException, causes: list[JvmCause] | None = None) -> Recovery:
    """Whether a flow that failed with ``exc`` can be restarted, decided by type: an
    EventlakeError's own, psycopg's connection errors (transient), else the JVM causes'
    classes and Spark conditions (unknown when none decides). ``causes``:
    ``jvm_causes(exc)`` when the caller has them."""
    if isinstance(exc, EventlakeError):
        return exc.recovery
    cause = exc.__cause__
    if cause is not None and cause is not exc:
        found = recovery_of(cause)
        if found is not Recovery.UNKNOWN:
            return found
    if causes is None:
        causes = jvm_causes(exc)
    if _disk_full(exc, causes):
        return Recovery.TRANSIENT
    if any(
        kind.__module__.startswith("psycopg") and kind.__name__ in _PSYCOPG_TRANSIENT
        for kind in type(exc).__mro__
    ):  # a lost or refused connection, e.g. AdminShutdown when the server stops
        return Recovery.TRANSIENT
    for link in causes:
        found_condition = link.condition or ""
        if found_condition.startswith(_FATAL_CONDITIONS) or link.cls in _FATAL_CLASSES:
            return Recovery.FATAL
        if found_condition.startswith(_TRANSIENT_CONDITIONS) or link.cls in _TRANSIENT_CLASSES:
            return Recovery.TRANSIENT
    return Recovery.UNKNOWN


def fix_for(exc: BaseException) -> str | None:
    """The fix eventlake knows for a Spark or Delta error condition in ``exc``'s JVM causes."""
    fixes = [_FIXES[c.condition] for c in jvm_causes(exc) if c.condition in _FIXES]
    return fixes[0] if fixes else None


def _translate(exc: BaseException, causes: list[JvmCause], cond: str | None, context: str,
               in_query: bool) -> EventlakeError:  # fmt: skip
    from pyspark.errors import AnalysisException, StreamingQueryException

    where = f"{context}: " if context else ""
    classes = {c.cls for c in causes}
    cause = _summary(exc, causes)

    if cond in _JARS_CONDITIONS or classes & set(_CLASS_MISSING):
        return EventlakeError(
            ErrorCode.JARS_MISSING,
            f"{where}Spark cannot load a connector's classes ({cause}).",
        )
    if classes & set(_KAFKA_TOPIC_MISSING):
        return EventlakeError(
            ErrorCode.KAFKA_TOPIC_MISSING,
            f"{where}a Kafka topic the query reads or writes does not exist ({cause}).",
        )
    if classes & set(_KAFKA_CONFIG):
        return EventlakeError(
            ErrorCode.KAFKA_CLIENT_CONFIG,
            f"{where}Kafka's Java client refused its configuration ({cause}).",
        )
    if classes & set(_KAFKA_TIMEOUT):
        return EventlakeError(
            ErrorCode.KAFKA_UNREACHABLE, f"{where}Kafka did not answer in time ({cause})."
        )
    if classes & set(_STORAGE_UNREACHABLE):
        return EventlakeError(
            ErrorCode.STORAGE_UNAVAILABLE, f"{where}a filesystem did not answer ({cause})."
        )
    if _disk_full(exc, causes):
        return EventlakeError(
            ErrorCode.STORAGE_FULL, f"{where}a filesystem has no space left ({cause})."
        )
    if classes & set(_STORAGE_SCHEME):
        return EventlakeError(
            ErrorCode.STORAGE_UNAVAILABLE,
            f"{where}Spark's Hadoop client has no filesystem for a URI's scheme ({cause}).",
            fix="add the filesystem's jars (e.g. hadoop-aws for s3a://) to Spark's classpath "
            "(spark.jars), or use a scheme pyspark's Hadoop client speaks (hdfs://, file:)",
        )
    if _CHECKPOINT_NOT_NEW in {c.condition for c in causes} | {cond}:
        return EventlakeError(
            ErrorCode.CHECKPOINT_NOT_NEW,
            f"{where}the checkpoint has no planned batch, yet holds files Spark did not "
            f"expect ({cause}).",
        )
    failed = [c for c in causes if c.condition == _RAISED and FAIL_MARK in c.message]
    if failed:
        text = failed[-1].message.split(FAIL_MARK, 1)[1].lstrip(": ").splitlines()[0]
        return EventlakeError(ErrorCode.EXPECTATION_FAILED, f"{where}expectation {text}")
    fixes = [_FIXES[c.condition] for c in causes if c.condition in _FIXES]
    if isinstance(exc, StreamingQueryException) or fixes or in_query:
        return EventlakeError(
            ErrorCode.QUERY_FAILED,
            f"{where}the streaming query failed: {cause}",
            fix=fixes[0] if fixes else None,
        )
    if isinstance(exc, AnalysisException):
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else cond or "?"
        return EventlakeError(
            ErrorCode.SPARK_ANALYSIS, f"{where}Spark rejected the query plan: {detail}"
        )
    return EventlakeError(ErrorCode.SPARK_ERROR, f"{where}Spark raised {cause}")
