"""The pyarrow JSON decoder claims only the rows it decodes as from_json would, in order."""

from __future__ import annotations

import pyarrow as pa

from eventlake.transforms.arrow_json import MAX_FAILURES, decode

NAMES = ["user_id", "page"]


def _rows(values: list[str | None]) -> list[dict[str, object]]:
    return decode(pa.array(values, pa.string()), NAMES).to_pylist()


def test_objects_of_strings_decode_and_keep_their_rows() -> None:
    rows = _rows(
        [
            '{"user_id": "u1", "page": "/a"}',
            '  {"page": "/b", "extra": [1, {"x": null}], "user_id": "u2"}',
            '{"user_id": null}',
            '{"user_id": "caf\\u00e9 \\"q\\" \\n"}',
            "{}",
        ]
    )
    assert rows == [
        {"ok": True, "f0": "u1", "f1": "/a"},
        {"ok": True, "f0": "u2", "f1": "/b"},
        {"ok": True, "f0": None, "f1": None},
        {"ok": True, "f0": 'café "q" \n', "f1": None},
        {"ok": True, "f0": None, "f1": None},
    ]


def test_what_from_json_must_decode_is_left_to_it() -> None:
    left = [
        None,
        "",
        "   ",
        "not json",
        "[1, 2]",
        '"text"',
        '{"user_id": 7}',  # from_json gives the number's text
        '{"user_id": {"id": 7}}',
        '{"user_id": "a", "user_id": "b"}',
        '{"user_id": "a"}{"user_id": "b"}',
        '{"user_id": "a"} trailing',
        "{'user_id': 'single quotes'}",
        '{"user_id":\n"multi-line"}',
        '\ufeff{"user_id": "bom"}',
        '{"user_id": "\\ud800"}',
        '{"user_id": "a",}',
    ]
    # Each between two good rows: the rows around a failure still decode, in order.
    values: list[str | None] = []
    for i, text in enumerate(left):
        values += [f'{{"user_id": "ok{i}"}}', text]
    values.append('{"user_id": "last"}')
    rows = _rows(values)
    assert [r["ok"] for r in rows[1::2]] == [False] * len(left)
    assert [r["f0"] for r in rows[0::2]] == [f"ok{i}" for i in range(len(left))] + ["last"]
    assert all(r["ok"] for r in rows[0::2])


def test_data_the_path_does_not_suit_is_given_up_on_after_a_few_failures() -> None:
    values = [f'{{"user_id": {i}}}' for i in range(200)] + ['{"user_id": "u"}']
    rows = _rows(values)
    assert not any(r["ok"] for r in rows)  # the string at the end is past the budget
    assert MAX_FAILURES < 200


def test_empty_input() -> None:
    assert _rows([]) == []
