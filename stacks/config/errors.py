"""Configuration errors: one :class:`ConfigError` naming every bad key, raised before anything is registered.

Keys are written in full (``eks-training:nodeGroups.gpu.minSize``). Validators on the models raise
:class:`Rule` with problems relative to the model; :func:`format_validation` turns pydantic's
errors into full keys, so a message can name the sibling keys it is about with ``@{field}``.
"""

import difflib
import re
from typing import Any, Optional, TypeVar, Union, get_args, get_origin

import pulumi
from pydantic import BaseModel, ValidationError

from stacks.bundle import REFERENCE
from stacks.config.base import INT32_MAX, oversized_integers
from stacks.yaml_text import quoted_list, shell_words

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
        super().__init__(self._text("; no resource was created"))

    def _text(self, after: str) -> str:
        listed = "\n".join(f"  - {p}" for p in self.problems)
        return f"invalid stack configuration ({len(self.problems)} problem(s)){after}:\n{listed}"

    @property
    def offline(self) -> str:
        """The message for a tool that creates nothing (``plan``, ``local``, ``preflight``, ``rehearse``): the
        problems alone."""
        return self._text("")


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


def _misspelt(extra: str, missing: list[str]) -> str | None:
    """The required key an unknown key is a misspelling of (``instanceType`` for ``instanceTypes``), or ``None``."""
    close = difflib.get_close_matches(extra, missing, n=1, cutoff=0.75)
    if not close:
        close = [m for m in missing if m.lower() == extra.lower()]
    if not close and len(extra) >= 4:
        # a key written without its unit or qualifier: quota for quotaPercent, storageCapacity for storageCapacityGib
        prefixed = [m for m in missing if m.lower().startswith(extra.lower()) or extra.lower().startswith(m.lower())]
        close = prefixed if len(prefixed) == 1 else []
    return close[0] if close else None


def _prefixed(extra: str, valid: list[str]) -> list[str]:
    """The one valid key ``extra`` is the start of (``quota`` of ``quotaPercent``), if exactly one."""
    found = [v for v in valid if len(extra) >= 4 and v.lower().startswith(extra.lower()) and v != extra]
    return found if len(found) == 1 else []


def _model_at(model: Optional[type[BaseModel]], loc: tuple[Any, ...]) -> Optional[type[BaseModel]]:
    """The config model of the object at ``loc`` inside ``model`` (through nested models, lists and maps of them)."""
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue  # an index into a list: the list's item model was taken with its field
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> Optional[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin in (list, Union) or str(origin) == "types.UnionType":
        for arg in get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def _valid_keys(model: Optional[type[BaseModel]]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()] if model is not None else []


def format_validation(path: str, err: ValidationError, model: Optional[type[BaseModel]] = None) -> list[str]:
    """pydantic's errors for the section at ``path`` (validated with ``model``) as full-key problem lines.

    An unknown key that is a misspelling of a required key missing from the same object (``instanceType:``
    for ``instanceTypes:``) is one mistake, reported once at the key the user wrote, naming the key meant; other
    unknown keys name the closest valid key when one is close."""
    errors = err.errors()
    missing: dict[tuple[Any, ...], list[str]] = {}
    for e in errors:
        if e["type"] == "missing" and e["loc"] and isinstance(e["loc"][-1], str):
            missing.setdefault(tuple(e["loc"][:-1]), []).append(e["loc"][-1])
    meant: dict[tuple[Any, ...], str] = {}
    explained: set[tuple[Any, ...]] = set()
    for e in errors:
        if e["type"] == "extra_forbidden" and e["loc"] and isinstance(e["loc"][-1], str):
            parent = tuple(e["loc"][:-1])
            guess = _misspelt(e["loc"][-1], [m for m in missing.get(parent, []) if parent + (m,) not in explained])
            if guess is not None:
                meant[tuple(e["loc"])] = guess
                explained.add(parent + (guess,))
    out: list[str] = []
    for e in errors:
        loc = tuple(e["loc"])
        where = join(path, _loc(loc))
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, Rule):
            out.extend(expand(where, f, m) for f, m in cause.problems)
        elif e["type"] == "extra_forbidden" and loc in meant:
            out.append(f"{key(where)}: unknown key; did you mean {meant[loc]} (a required key, not set)? Rename it")
        elif e["type"] == "extra_forbidden":
            valid = _valid_keys(_model_at(model, loc[:-1]))
            near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.75) or _prefixed(str(loc[-1]), valid)
            hint = f"did you mean {near[0]}? " if near else ""
            out.append(f"{key(where)}: unknown key; {hint}remove it or fix its spelling (the valid keys: {REFERENCE})")
        elif e["type"] == "missing" and loc in explained:
            continue  # the misspelt key above is the cause
        elif e["type"] == "missing":
            out.append(f"{key(where)}: required key is missing; set it (see {REFERENCE})")
        elif e["type"] == "value_error":
            out.append(f"{key(where)}: {str(cause) if cause is not None else e['msg']}")
        elif e["type"] == "list_type" and (item := _model_at(model, loc)) is not None:
            got = e.get("input")
            what = f"{got!r} is a string," if isinstance(got, str) else _yaml_kind(got) + " is"
            out.append(
                f"{key(where)}: {what} not a list; write a YAML list of mappings, each with the keys "
                f"{', '.join(_valid_keys(item))} (see {REFERENCE})"
            )
        elif (
            e["type"] in ("dict_type", "model_type", "model_attributes_type")
            and isinstance(e.get("input"), bool)
            and "enabled" in _valid_keys(_model_at(model, loc))
        ):
            out.append(f"{key(where)}: {str(e['input']).lower()} is not an object; {switch_fix(e['input'], loc[-1])}")
        elif (fix := _with_fix(e)) is not None:
            out.append(f"{key(where)}: {fix}")
        else:
            out.append(f"{key(where)}: {e['msg']} (got {e.get('input')!r})")
    return out


#: pydantic's bound errors (https://docs.pydantic.dev/latest/errors/validation_errors/): the bound's context key,
#: how the problem reads and the fix.
_BOUNDS = {
    "greater_than_equal": ("ge", "is below the minimum", "set it to {b} or more"),
    "greater_than": ("gt", "is not above", "set it above {b}"),
    "less_than_equal": ("le", "is above the maximum", "set it to {b} or less"),
    "less_than": ("lt", "is not below", "set it below {b}"),
}


def switch_fix(value: bool, section: object) -> str:
    """How to write a switch given as its section's value (``autoscaler: false``): as the section's key."""
    v = str(value).lower()
    return f"write the switch as its key, enabled: {v} (one level further in: {section}: {{enabled: {v}}})"


def _with_fix(e: Any) -> Optional[str]:
    """A pydantic error about a value's bounds or kind, in the words of the config and with its fix (``None``: no
    rewording for this error)."""
    ctx = e.get("ctx") or {}
    got = e.get("input")
    if e["type"] in _BOUNDS:
        name, what, fix = _BOUNDS[e["type"]]
        bound = ctx.get(name)
        return f"{got!r} {what} {bound}; {fix.format(b=bound)}"
    if e["type"] == "too_short" and not got and "min_length" in ctx:
        n = ctx["min_length"]
        return f"an empty list; give at least {n} item{'s' if n != 1 else ''}"
    if e["type"] in ("too_short", "string_too_short") and "min_length" in ctx:
        return f"{got!r} is too short: give at least {ctx['min_length']} item(s)/character(s)"
    if e["type"] in ("too_long", "string_too_long") and "max_length" in ctx:
        return f"{got!r} is too long: give at most {ctx['max_length']} item(s)/character(s)"
    if got is None and e["type"].endswith(("_type", "_parsing")):
        return (
            f"null (an empty value) is not {_WANTED.get(e['type'].split('_')[0], 'a value')}; set one, or remove "
            "the key"
        )
    if e["type"] == "literal_error" and "expected" in ctx:
        return f"{got!r} is not one of {ctx['expected']}; use one of them"
    if e["type"] in ("bool_parsing", "bool_type"):
        if isinstance(got, str) and got.strip().lower() in _BOOL_WORDS:
            meant = "true" if _BOOL_WORDS[got.strip().lower()] else "false"
            return f"{got!r} is a string, not a boolean; write {meant} without quotes"
        return f"{got!r} is not a boolean; write true or false"
    if e["type"] in ("int_parsing", "int_type", "int_from_float"):
        if isinstance(got, bool):
            return f"{str(got).lower()} is a boolean, not a whole number; write an integer such as 1"
        if isinstance(got, str) and re.fullmatch(r"\s*[-+]?\d+\s*", got):
            return f"{got!r} is a string, not a whole number; write {int(got)} without quotes"
        return f"{got!r} is not a whole number; write an integer such as 1"
    if e["type"] in ("float_parsing", "float_type"):
        if isinstance(got, str) and _number(got) is not None:
            return f"{got!r} is a string, not a number; write {got.strip()} without quotes"
        return f"{got!r} is not a number; write one such as 1.5"
    if e["type"] == "string_type":
        if isinstance(got, int) and not isinstance(got, bool):
            return f"{got!r} is a number, not a string; quote it: '{got}'"
        if isinstance(got, float):
            return (
                f"{got!r} is a number, not a string; quote it as you wrote it, e.g. '{got}' (YAML reads 1.30 as the "
                "number 1.3: write '1.30' for 1.30)"
            )
        if isinstance(got, bool):
            return f"{str(got).lower()} is a boolean, not a string; quote it: '{str(got).lower()}'"
        return f"{_yaml_kind(got)} is not a string; write a string"
    if e["type"] == "list_type":
        if isinstance(got, str):
            # each word quoted: YAML 1.2 (Pulumi's reader) takes 1e-4 or 08 as numbers, where 1.1 does not
            words = shell_words(got)
            flags = any(w.startswith("-") or "=" in w for w in words)
            if "," in got and not flags and all(w.endswith(",") for w in words[:-1]):
                # a comma-separated list, as the AWS CLI takes them (subnet-a,subnet-b): its items, not one; a
                # command's flag (--gpus=0,1) is one argument
                words = [w.strip() for w in got.split(",") if w.strip()]
            return f"{got!r} is a string, not a list; write a YAML list, e.g. {quoted_list(words)}"
        return f"{_yaml_kind(got)} is not a list; write a YAML list, e.g. [a, b]"
    if e["type"] in ("dict_type", "model_type", "model_attributes_type"):
        return f"{_yaml_kind(got)} is not an object; write a YAML mapping of its keys (key: value, see {REFERENCE})"
    return None


#: What a type error's kind of value is, in the words of the config reference.
_WANTED = {
    "int": "a whole number",
    "float": "a number",
    "bool": "a boolean (true or false)",
    "string": "a string",
    "list": "a list",
    "dict": "a mapping",
    "model": "a mapping of its keys",
}

#: The words YAML 1.1 (PyYAML) reads as booleans and YAML 1.2 (Pulumi's stack files) as strings.
_BOOL_WORDS = {
    **dict.fromkeys(("true", "yes", "y", "on", "1"), True),
    **dict.fromkeys(("false", "no", "n", "off", "0"), False),
}


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def _yaml_kind(value: Any) -> str:
    """How ``value`` reads in the user's YAML (``null``, ``a list [...]``, ``a mapping {...}``)."""
    if value is None:
        return "null (an empty value)"
    if isinstance(value, list):
        return f"a list {value!r}"
    if isinstance(value, dict):
        return f"a mapping {value!r}"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)


_M = TypeVar("_M", bound=BaseModel)


def validate(path: str, model: type[_M], value: Any) -> tuple[Optional[_M], list[str]]:
    """``value`` validated as the section at ``path``: the model, or ``None`` and its problems as full-key lines.
    After the model's own rules (their messages name a likelier fix, such as a unit), every integer must fit in
    32 bits (:data:`~stacks.config.base.INT32_MAX`)."""
    try:
        parsed = model.model_validate(value)
    except ValidationError as exc:
        return None, format_validation(path, exc, model)
    big = [
        expand(
            path,
            field,
            f"{n} is larger than {INT32_MAX}, the largest integer AWS and Kubernetes take; set a smaller number",
        )
        for field, n in oversized_integers(parsed)
    ]
    return (None, big) if big else (parsed, [])
