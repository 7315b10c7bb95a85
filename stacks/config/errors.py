"""Configuration errors: one :class:`ConfigError` naming every bad key, raised before anything is registered.

Keys are written in full (``eks-training:nodeGroups.gpu.minSize``). Validators on the models raise
:class:`Rule` with problems relative to the model; :func:`format_validation` turns pydantic's
errors into full keys, so a message can name the sibling keys it is about with ``@{field}``.
"""

import re
from typing import Any

import pulumi
from pydantic import ValidationError

NAMESPACE = "eks-training"

_KEY_REF = re.compile(r"@\{([^}]*)\}")


def key(path: str) -> str:
    """The full config key of ``path`` (``nodeGroups.gpu.minSize`` -> ``eks-training:nodeGroups.gpu.minSize``)."""
    return f"{NAMESPACE}:{path}" if path else NAMESPACE


def join(path: str, field: str) -> str:
    """``path`` + ``.field`` (or ``[i]`` for an index)."""
    if not field:
        return path
    if field.startswith("["):
        return f"{path}{field}"
    return f"{path}.{field}" if path else field


class ConfigError(pulumi.RunError):
    """Raised when the stack configuration is invalid; nothing has been registered yet."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        text = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"invalid stack configuration ({len(problems)} problem(s)); no resource was created:\n{text}"
        )


class Rule(ValueError):
    """Problems a model validator found: ``(field, message)`` pairs relative to the model. ``field`` is the
    key the problem is reported under (``""``: the model itself); ``@{other}`` in a message names a
    sibling key in full."""

    def __init__(self, *problems: tuple[str, str]):
        self.problems = list(problems)
        super().__init__("; ".join(m for _, m in problems))


def expand(path: str, field: str, message: str) -> str:
    """One problem line: the full key, then the message with its ``@{field}`` references expanded."""
    text = _KEY_REF.sub(lambda m: key(join(path, m.group(1))), message)
    return f"{key(join(path, field))}: {text}"


def check(problems: list[tuple[str, str]]) -> None:
    """Raise :class:`Rule` when a validator collected problems."""
    if problems:
        raise Rule(*problems)


def _loc(parts: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def format_validation(path: str, err: ValidationError) -> list[str]:
    """pydantic's errors for the section at ``path`` as full-key problem lines."""
    out: list[str] = []
    for e in err.errors():
        where = join(path, _loc(e["loc"]))
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, Rule):
            out.extend(expand(where, f, m) for f, m in cause.problems)
        elif e["type"] == "extra_forbidden":
            out.append(f"{key(where)}: unknown key; remove it or fix its spelling (see Pulumi.yaml for the valid keys)")
        elif e["type"] == "missing":
            out.append(f"{key(where)}: required key is missing; set it (see Pulumi.yaml)")
        elif e["type"] == "value_error":
            out.append(f"{key(where)}: {str(cause) if cause is not None else e['msg']}")
        else:
            out.append(f"{key(where)}: {e['msg']} (got {e.get('input')!r})")
    return out
