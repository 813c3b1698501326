"""Runs the Python snippets of the docs in one interpreter, as a reader would.

Each request on stdin is one JSON line {"code": ...}; the statements of the
code run in order in one namespace shared by every request, and an
expression statement's value is printed as the interactive interpreter
would. The reply is one JSON line per request: a list of {"start", "end",
"output", "error"}, one per top-level statement, lines 1-based.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
import traceback

namespace: dict[str, object] = {"__name__": "__docs__"}


def run(code: str) -> list[dict[str, object]]:
    out = []
    for node in ast.parse(code).body:
        buf = io.StringIO()
        error = None
        try:
            with contextlib.redirect_stdout(buf):
                if isinstance(node, ast.Expr):
                    value = eval(compile(ast.Expression(node.value), "<docs>", "eval"), namespace)
                    if value is not None:
                        print(repr(value))
                else:
                    exec(compile(ast.Module([node], []), "<docs>", "exec"), namespace)
        except Exception:  # the test reports it with the statement's lines
            error = traceback.format_exc()
        out.append({"start": node.lineno, "end": node.end_lineno, "output": buf.getvalue(), "error": error})
        if error:
            break
    return out


for line in sys.stdin:
    print(json.dumps(run(json.loads(line)["code"])), flush=True)
