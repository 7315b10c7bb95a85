"""The stack outputs' reference (``docs/reference/outputs.md``), read from the docstrings of the functions that
export them: :func:`stacks.outputs.export_outputs` (a cluster stack) and :func:`stacks.jobs_only.build_jobs_only` (a
team's jobs-only stack), each listing its outputs under ``Outputs:``. The files are parsed, not imported: they are the
Pulumi program, which no tool imports (``stacks/cli.py``). ``tests/mock/test_stack_outputs_documented.py`` and
``tests/mock/test_jobs_only.py`` check that every output the stacks export is listed."""

import ast
import re
from pathlib import Path

from stacks.bundle import ROOT
from stacks.docs.markdown import cell, code, from_docstring, page_header, table, text
from stacks.docs.source import parse

#: Each kind of stack: the module and function whose docstring lists its outputs.
EXPORTERS = {
    "A cluster stack": ("stacks/outputs.py", "export_outputs"),
    "A jobs-only stack (a team's)": ("stacks/jobs_only.py", "build_jobs_only"),
}
_ITEM = re.compile(r"^- ``(?P<key>[^`]+)``: (?P<text>.*)$")


def documented_outputs(path: str, function: str) -> dict[str, str]:
    """The ``Outputs:`` list of ``function``'s docstring in the module at ``path``: output -> its description."""
    tree = parse((ROOT / Path(path)).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    doc = ast.get_docstring(node) or ""
    lines = doc.split("Outputs:", 1)[1].splitlines() if "Outputs:" in doc else []
    out: dict[str, str] = {}
    key = None
    for line in lines:
        m = _ITEM.match(line)
        if m:
            key = m.group("key")
            out[key] = m.group("text")
        elif key is not None and line.startswith("  ") and line.strip():
            out[key] += " " + line.strip()
        elif out and not line.strip():
            key = None
    return out


def outputs_reference() -> str:
    """``docs/reference/outputs.md``: what each kind of stack exports."""
    out = [
        *page_header("Stack outputs", "the docstrings of stacks/outputs.py and stacks/jobs_only.py"),
        "",
        text(
            "`pulumi stack output` prints a stack's outputs; `pulumi stack output NAME` one of them, and "
            "`--json` the structured ones. An output that applies only to some stacks says when."
        ),
    ]
    for title, (path, function) in EXPORTERS.items():
        rows = [[code(k), cell(from_docstring(v))] for k, v in documented_outputs(path, function).items()]
        out += ["", f"## {title}", "", table(["Output", "What it is"], rows)]
    return "\n".join(out) + "\n"
