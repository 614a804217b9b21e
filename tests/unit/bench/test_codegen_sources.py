"""Grouping Spark's generated classes by template, from the driver log's DEBUG dumps."""

from __future__ import annotations

from bench.codegen_sources import templates


def _dump(clock: str, watermark_us: int) -> str:
    body = [
        "public SpecificPredicate generate(Object[] references) {",
        "  return new SpecificPredicate(references);",
        "}",
        "  public boolean eval(InternalRow i) {",
        "    long value_1 = i.getLong(5);",
        f"    return value_1 <= {watermark_us}L;",
        "  }",
    ]
    lines = "".join(f"/* {n:03d} */ {line}\n" for n, line in enumerate(body, 1))
    compiled = f"{clock} INFO CodeGenerator: Code generated in 6.6 ms\n"
    return f"{clock} DEBUG CodeGenerator: \n{lines}\n{compiled}"


OTHER = (
    "22:30:56 DEBUG CodeGenerator: \n"
    "/* 001 */ public Object generate(Object[] references) {\n"
    "/* 002 */   return new GeneratedIteratorForCodegenStage1(references);\n"
    "/* 003 */ }\n"
)


def test_classes_that_differ_by_a_literal_are_one_template_and_counted() -> None:
    log = (
        "22:30:15 WARN Something: unrelated\n"
        + _dump("22:30:15", 0)
        + _dump("22:30:16", 1767225600163000)
        + OTHER
        + _dump("22:30:17", 1767225601163000)
    )
    total, rows = templates(log)
    assert total == 4
    assert [(r["kind"], r["classes"]) for r in rows] == [
        ("SpecificPredicate", 3),
        ("GeneratedIteratorForCodegenStage1", 1),
    ]
    # the line shown is from the template's latest class, where the watermark is a real one
    assert rows[0]["a_literal_line"] == "return value_1 <= 1767225601163000L;"
    assert rows[1]["a_literal_line"] is None
