from __future__ import annotations

from eventlake.errors import ErrorCode, EventlakeError, translate


def test_render_has_code_expected_and_fix() -> None:
    err = EventlakeError(ErrorCode.KAFKA_UNREACHABLE, "no broker", expected="one", fix="start")
    text = str(err)
    assert text.startswith("[EL-KAFKA-003] no broker")
    assert "Expected: one" in text
    assert "Fix: start" in text


def test_codes_are_unique() -> None:
    values = [c.value for c in ErrorCode]
    assert len(values) == len(set(values))


def test_translate_passes_eventlake_errors_through() -> None:
    err = EventlakeError(ErrorCode.QUERY_FAILED, "x")
    assert translate(err) is err


def test_translate_missing_kafka_connector() -> None:
    exc = RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find data source: kafka.")
    err = translate(exc, context="query 'orders.bronze'")
    assert err.code == ErrorCode.JARS_MISSING
    assert "query 'orders.bronze'" in err.what
    assert err.fix is not None
    assert "make jars" in err.fix


def test_translate_unknown_topic() -> None:
    exc = RuntimeError(
        "Job aborted\nCaused by: org.apache.kafka.common.errors.UnknownTopicOrPartitionException:"
        " This server does not host this topic-partition."
    )
    assert translate(exc).code == ErrorCode.KAFKA_TOPIC_MISSING


def test_translate_uses_innermost_cause() -> None:
    exc = RuntimeError(
        "An error occurred\nCaused by: java.io.IOException: outer\n"
        "Caused by: java.lang.IllegalStateException: the real reason"
    )
    err = translate(exc)
    assert err.code == ErrorCode.SPARK_ERROR
    assert "java.lang.IllegalStateException: the real reason" in err.what
