"""The house's sizes: no class over 320 lines, no function over 70, in the shipped package.

A class or a function past these sizes has, each time so far, held two jobs (the worker and
its decode-thread calibration; the window and its composer's send flow). The sizes count
every line from ``class``/``def`` to the last, docstring included, as a reader scrolls them.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"

CLASS_LINES = 320
FUNCTION_LINES = 70

KEPT_WHOLE: dict[str, str] = {
    "app/engine/generation.py:decode_reply": (
        "the per-token decode loop: each token's path runs in one frame over names bound to "
        "locals; splitting it adds Python calls per token, the cost the loop exists to avoid"
    ),
}
"""Functions allowed past the size, each with the reason (``path:name`` → why)."""


def _oversized(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                limit = CLASS_LINES
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = FUNCTION_LINES
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit and f"{where}:{node.name}" not in KEPT_WHOLE:
                found.append(f"{where}:{node.lineno} {node.name}: {lines} lines (at most {limit})")
    return found


def test_no_class_or_function_past_the_house_sizes() -> None:
    assert _oversized(APP) == []


def test_the_size_check_sees_what_is_past_the_sizes(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES - 1))
    (package / "short.py").write_text(f"def fits():\n{body}\n")
    (package / "long.py").write_text(f"def long():\n{body}\n    y = 0\n")
    methods = "\n".join(f"    def m{i}(self):\n        pass\n" for i in range(CLASS_LINES // 3 + 1))
    (package / "wide.py").write_text(f"class Wide:\n{methods}")
    assert _oversized(package) == [
        f"app/long.py:1 long: {FUNCTION_LINES + 1} lines (at most {FUNCTION_LINES})",
        f"app/wide.py:1 Wide: {CLASS_LINES + 1} lines (at most {CLASS_LINES})",
    ]


def test_every_kept_whole_function_exists() -> None:
    for key in KEPT_WHOLE:
        where, name = key.split(":")
        source = (APP.parent / where).read_text("utf-8")
        assert f"def {name}(" in source, key
