"""Every setting of every preset, changed to a value of the wrong shape or removed, is read or refused as the
configuration promises: a :class:`ConfigError` (never another exception), each problem one line that starts with the
key it is about; one of them is about the changed key, a key inside or around it or of the same entry, or names
it (a rule across keys reports the key to fix: ``desiredSize``, naming ``minSize``, when ``minSize`` goes).

Each place of a preset's tree is changed once, the first preset that has it (a job's ``args[1]`` and a group's
``maxSize`` once, whichever preset and entry): 76 places, about 460 readings, a few CPU-seconds.
"""

import copy
import re
from typing import Any, Iterator, Union

import pytest

from stacks.config import ConfigError, load_config
from tests.harness import PROJECT, REPO, stack_config, stack_names

Path_ = tuple[Union[str, int], ...]

#: What each place is changed to: a value of every YAML shape, and the place removed.
REMOVED = object()
CHANGES: tuple[Any, ...] = (None, 1.5, "x", [], {"x": 1}, REMOVED)

#: A problem starts with the key it is about: ``<namespace>:<key>`` with its path (``.name``, ``[0]``).
KEY = re.compile(r"^[a-z][\w-]*:[A-Za-z][\w.\-\[\]]*: ")


def _places(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    if path:
        yield path
    if isinstance(value, dict):
        for name, inner in value.items():
            yield from _places(inner, (*path, name))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _places(inner, (*path, i))


def _shape(stack: str, path: Path_) -> tuple[str, ...]:
    """A place without its entries' names and indices (``jobs.<name>.args[i]``): changed once, not per preset."""
    shape: list[str] = []
    value: Any = stack_config(stack)
    for depth, step in enumerate(path):
        entries = depth > 0 and isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
        shape.append("[i]" if isinstance(step, int) else "<name>" if entries else str(step))
        value = value[step]
    return tuple(shape)


def _written(path: Path_) -> str:
    """The place as the messages write it: ``eks-training:jobs.train.args[1]``."""
    return str(path[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])


def _cases() -> list[tuple[str, Path_]]:
    seen: set[tuple[str, ...]] = set()
    cases = []
    for stack in stack_names():
        for path in _places(stack_config(stack)):
            shape = _shape(stack, path)
            if shape not in seen:
                seen.add(shape)
                cases.append((stack, path))
    return cases


def _changed(stack: str, path: Path_, change: Any) -> dict[str, Any]:
    config = copy.deepcopy(stack_config(stack))
    parent: Any = config
    for step in path[:-1]:
        parent = parent[step]
    if change is REMOVED:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(change)
    return config


def test_every_place_of_every_preset_changed_is_read_or_refused_naming_its_key() -> None:
    cases = _cases()
    assert len(cases) > 60, "the presets' places: fewer than expected"
    wrong: list[str] = []
    refused = 0
    for stack, path in cases:
        for change in CHANGES:
            shown = "removed" if change is REMOVED else repr(change)
            try:
                load_config(PROJECT, stack, _changed(stack, path, change), REPO)
                continue
            except ConfigError as error:
                problems = error.problems
            except Exception as error:  # noqa: BLE001 - the very thing this test looks for
                wrong.append(f"{stack} {_written(path)} {shown}: {type(error).__name__}: {error}")
                continue
            refused += 1
            keys = []
            for problem in problems:
                if not KEY.match(problem) or "\n" in problem:
                    wrong.append(f"{stack} {_written(path)} {shown}: not one line about a key: {problem!r}")
                keys.append(problem.split(": ", 1)[0])
            place, entry = _written(path), _written(path[:-1]) if len(path) > 2 else None
            about = [k for k in keys if k.startswith(place) or place.startswith(k) or (entry and k.startswith(entry))]
            name = re.split(r"[.:]", place.split("[")[0])[-1]
            if not about and not any(name in p for p in problems):
                wrong.append(f"{stack} {place} {shown}: no problem about it: {problems}")
    assert wrong == []
    assert refused > len(cases), "most changes are refused: the changes reached the loader"


@pytest.mark.parametrize("change", [1.5, [], {"x": 1}], ids=["number", "list", "mapping"])
def test_a_changed_script_is_refused_naming_it(change: Any) -> None:
    """The check above can fail: a script of the wrong shape is one problem about that key."""
    with pytest.raises(ConfigError) as error:
        load_config(PROJECT, "dev", _changed("dev", (f"{PROJECT}:jobs", "train", "script"), change), REPO)
    assert [p.split(": ", 1)[0] for p in error.value.problems] == [f"{PROJECT}:jobs.train.script"]
