"""Snapshots of what every stack registers, so a refactoring can prove it changed nothing.

``python -m tests.snapshot`` evaluates every ``Pulumi.<stack>.yaml`` under the mocks (update mode)
and writes ``tests/snapshots/<stack>.json``: each registered resource (type, name, parent,
resource and property dependencies, options, inputs), sorted, with values that differ between
runs (temporary paths) normalised. ``tests/mock/test_snapshots.py`` compares a fresh evaluation with
the stored file; a deliberate change of what a stack registers is committed together with the
regenerated snapshot, so the diff shows exactly what changed.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tests.harness import REPO, Program, run_program, stack_names

SNAPSHOT_DIR = REPO / "tests" / "snapshots"


def _short_urn(urn: str) -> str:
    """``urn:pulumi:stack::project::a$b::name`` -> ``b::name`` (the stack name is not part of it)."""
    if not urn:
        return ""
    parts = urn.split("::")
    return f"{parts[-2].split('$')[-1]}::{parts[-1]}" if len(parts) >= 4 else urn


def _normalise(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:  # IAM and bucket policies: compared as documents, not by key order
            return {"<json>": _normalise(json.loads(value))}
        except ValueError:
            pass
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in sorted(value.items()) if not k.startswith("__")}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if type(value).__name__ in ("Unknown",) or value == "04da6b54-80e4-46f7-96ec-b56ff0331ba9":
        return "<unknown>"
    if hasattr(value, "path") and type(value).__name__.endswith("Asset"):
        return f"<{type(value).__name__}:{Path(str(value.path)).name}>"
    return value


def snapshot(p: Program) -> list[dict[str, Any]]:
    """The program's registrations as sorted, JSON-ready records."""
    out = []
    for r in p.registrations:
        out.append(
            {
                "type": r.type,
                "name": r.name,
                "parent": _short_urn(r.parent),
                "provider": _short_urn(r.provider.rsplit("::", 1)[0]) if r.provider else "",
                "dependencies": sorted(_short_urn(u) for u in r.dependencies),
                "propertyDependencies": {
                    k: sorted(_short_urn(u) for u in v) for k, v in sorted(r.property_dependencies.items()) if v
                },
                "retainOnDelete": r.retain_on_delete,
                "ignoreChanges": sorted(r.ignore_changes),
                **({"customTimeouts": dict(sorted(r.custom_timeouts.items()))} if r.custom_timeouts else {}),
                "inputs": _normalise(r.inputs),
            }
        )
    return sorted(out, key=lambda rec: (rec["type"], rec["name"]))


def render(stack: str, program: Program | None = None) -> str:
    """The snapshot text of one stack (of ``program`` when given, else of a fresh evaluation)."""
    return json.dumps(snapshot(program or run_program(stack)), indent=1, sort_keys=True, default=str) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.snapshot", description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="*", help="stacks to write (default: every Pulumi.<stack>.yaml)")
    args = parser.parse_args(argv)
    SNAPSHOT_DIR.mkdir(parents=True, exist_ok=True)
    for stack in args.stacks or stack_names():
        path = SNAPSHOT_DIR / f"{stack}.json"
        path.write_text(render(stack))
        print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
