from __future__ import annotations

import re
from pathlib import Path

import pytest

from eventlake.errors import (
    CODES,
    Category,
    ConfigError,
    ConnectorError,
    ErrorCode,
    EventlakeError,
    PipelineDefinitionError,
    PipelineRuntimeError,
    translate,
)


def test_render_has_code_expected_and_fix() -> None:
    err = EventlakeError(ErrorCode.KAFKA_UNREACHABLE, "no broker", expected="one", fix="start")
    text = str(err)
    assert text.startswith("[EL-KAFKA-003] no broker")
    assert "Expected: one" in text
    assert "Fix: start" in text


def test_codes_are_unique_and_all_in_the_one_table() -> None:
    values = [c.value for c in ErrorCode]
    assert len(values) == len(set(values))
    assert set(values) <= set(CODES)
    for code in ErrorCode:
        entry = CODES[code]
        assert entry.title, code
        assert entry.expected, code
        assert entry.fix, code


def test_the_table_supplies_expected_and_fix() -> None:
    err = EventlakeError(ErrorCode.JARS_MISSING, "no jars here")
    assert err.expected == CODES[ErrorCode.JARS_MISSING].expected
    assert err.fix is not None
    assert "eventlake jars fetch" in err.fix
    specific = EventlakeError(ErrorCode.JARS_MISSING, "x", fix="do this")
    assert specific.fix == "do this"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (ErrorCode.CONFIG_UNKNOWN_KEY, ConfigError),
        (ErrorCode.PIPELINE_INVALID, PipelineDefinitionError),
        (ErrorCode.KAFKA_TOPIC_MISSING, ConnectorError),
        (ErrorCode.SINK_WRITE_FAILED, ConnectorError),
        (ErrorCode.QUERY_FAILED, PipelineRuntimeError),
    ],
)
def test_an_error_is_built_as_its_category(code: ErrorCode, kind: type[EventlakeError]) -> None:
    err = EventlakeError(code, "x")
    assert type(err) is kind
    assert isinstance(err, EventlakeError)
    assert err.category is CODES[code].category
    with pytest.raises(kind):
        raise EventlakeError(code, "x")


def test_translate_passes_eventlake_errors_through() -> None:
    err = EventlakeError(ErrorCode.QUERY_FAILED, "x")
    assert translate(err) is err


def test_translate_does_not_read_message_text() -> None:
    """A plain exception whose text names Kafka or a data source stays a generic Spark error:
    translation goes by type and condition (see tests/integration/test_errors.py)."""
    exc = RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find data source: kafka.")
    assert translate(exc).code == ErrorCode.SPARK_ERROR


def test_readme_lists_every_code_family() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    families = {re.sub(r"-\d+$", "", c) for c in CODES if CODES[c].category != Category.VALIDATION}
    for family in families:
        assert family in readme, family
    for code, entry in CODES.items():
        if entry.category is Category.VALIDATION and code != "EL-V000":
            assert code in readme, code
