"""What Spark keeps compiling: the generated classes in a driver log, grouped by template.

Spark's ``CodeGenerator`` logs each class it compiles at DEBUG. With this line pair added to
``eventlake/resources/log4j2-spark.properties`` for a lab (never for a measured soak: the
dumps slow the driver)::

    logger.codegen.name = org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
    logger.codegen.level = debug

``python -m bench.codegen_sources LOG`` reads the run's ``logs/eventlake.log`` and groups the
classes by their code with every long literal (``123L``) taken out: a template compiled
again and again differs from its last compile only by a literal, such as a stateful
operator's watermark. It prints the templates by count, with one line that holds a literal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

DUMP = re.compile(r"DEBUG CodeGenerator: \n((?:/\* \d+ \*/.*\n)+)")
LINE_NUMBER = re.compile(r"/\* \d+ \*/ ?")
LONG_LITERAL = re.compile(r"-?\d+L\b")
KIND = re.compile(r"return new (\w+)\(")


def templates(text: str) -> tuple[int, list[dict[str, object]]]:
    """The number of compiled classes in a log's ``text``, and their templates by count."""
    counts: Counter[str] = Counter()
    last: dict[str, str] = {}
    dumps = DUMP.findall(text)
    for dump in dumps:
        code = LINE_NUMBER.sub("", dump)
        key = hashlib.sha1(LONG_LITERAL.sub("<L>", code).encode()).hexdigest()[:10]
        counts[key] += 1
        last[key] = code
    rows = []
    for key, count in counts.most_common():
        code = last[key]
        kind = KIND.search(code)
        literal = next((line.strip() for line in code.splitlines()
                        if re.search(r"\d{9,}L\b", line)), None)  # fmt: skip
        rows.append({"template": key, "classes": count, "kind": kind.group(1) if kind else None,
                     "a_literal_line": literal})  # fmt: skip
    return len(dumps), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    total, rows = templates(args.log.read_text(errors="replace"))
    print(json.dumps({"classes": total, "templates": len(rows), "top": rows[: args.top]},
                     indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
