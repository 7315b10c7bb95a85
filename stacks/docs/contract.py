"""Generated parts of the job contract (``docs/reference/job-contract.md``): the exit codes of a ``pytorch`` job's
pods, as the pods' launcher (``training/launch.py``, shipped in the toolbox image) documents them in its docstring."""

import ast
import re

from stacks.bundle import ROOT
from stacks.docs.markdown import cell, from_docstring, table
from stacks.docs.source import parse

#: The launcher whose docstring lists the pod's exit codes under ``Exit codes``.
LAUNCHER = "training/launch.py"


def launcher_exit_codes() -> list[tuple[str, str]]:
    """``(code, meaning)`` of each item of the launcher docstring's ``Exit codes`` list."""
    doc = ast.get_docstring(parse((ROOT / LAUNCHER).read_text())) or ""
    section = doc.split("Exit codes", 1)[1].split("\n\n", 2)[1]
    items = re.split(r"^\* ", section, flags=re.M)[1:]
    out = []
    for item in items:
        for part in re.split(r";\s+(?=\d+ -- )", " ".join(item.split())):
            code, sep, meaning = part.partition(" -- ")
            if not sep:
                code, meaning = "any other", part.removeprefix("otherwise ")
            out.append((code, meaning.rstrip(";.")))
    return out


def exit_codes_table() -> str:
    """The launcher's exit codes as a table."""
    rows = [[cell(from_docstring(c)), cell(from_docstring(m))] for c, m in launcher_exit_codes()]
    return table(["Pod exit code", "Meaning (podFailurePolicy: what the Job does)"], rows)
