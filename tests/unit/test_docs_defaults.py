"""A default a page states in prose, as ``\\`key\\` (default X)`` and the like (``STATED``), is the one the
program applies: the config model's field default, or for a key whose field defaults to nothing, the value the code
applies in its place (``APPLIED``). The generated reference pages state every default from the models; this checks
the copies in the hand-written ones."""

import importlib
import inspect
import pkgutil
import re
from typing import Any, Callable

from pydantic import BaseModel

import stacks.config
from components.catalog import DEFAULT_SPOT_DISCOUNT
from stacks.docs import FILES, regenerate
from tests.config_support import trainer_defaults
from tests.harness import REPO

#: How a page's prose states a key's default: ``\`key\` (default X)``, ``(\`key\`, default X)``, ``X by default
#: (\`key\`)``, ``\`key\` (X by default)``, the key alone or with its path (``imageBuild.keepImages``); each with the
#: group of the key's last part and of the value.
STATED = [
    (re.compile(r"`(?:[a-zA-Z<>]+\.)*([a-zA-Z]+)` \(default ([^)]*)\)"), 1, 2),
    (re.compile(r"\(`(?:[a-zA-Z<>]+\.)*([a-zA-Z]+)`, default ([^)]*)\)"), 1, 2),
    (re.compile(r"(\d+(?:\.\d+)?\s*(?:s|h|%)?) by default \(`(?:[a-zA-Z<>]+\.)*([a-zA-Z]+)`\)"), 2, 1),
    (re.compile(r"`(?:[a-zA-Z<>]+\.)*([a-zA-Z]+)` \((\d+(?:\.\d+)?\s*(?:s|h|%)?) by default\)"), 1, 2),
]
#: Pages the code writes whole (their defaults come from the models themselves); the others have generated tables only.
GENERATED = {path for path, (_, make) in FILES.items() if make is not regenerate}


#: Keys whose field defaults to None, and what the program applies in its place.
APPLIED: dict[str, Callable[[], Any]] = {
    # the trainer's --pg-timeout-seconds (training/train_flags.py): the pods set PG_TIMEOUT_SECONDS only when it is set
    "collectiveTimeoutSeconds": lambda: trainer_defaults()["PG_TIMEOUT_SECONDS"],
    "checkpointEverySeconds": lambda: trainer_defaults()["CHECKPOINT_EVERY_SECONDS"],
    # NodeGroupConfig.discount
    "spotDiscount": lambda: DEFAULT_SPOT_DISCOUNT.fraction,
}


def model_defaults() -> dict[str, list[Any]]:
    """Each config key (its alias) -> the defaults of the model fields of that name."""
    found: dict[str, list[Any]] = {}
    for info in pkgutil.walk_packages(stacks.config.__path__, "stacks.config."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not (issubclass(cls, BaseModel) and cls.__module__ == module.__name__):
                continue
            for name, field in cls.model_fields.items():
                if not field.is_required():
                    found.setdefault(field.alias or name, []).append(field.get_default(call_default_factory=True))
    return found


def _value(text: str) -> Any:
    """The stated default as a value: ``60 s`` -> 60.0, ``1%`` -> 1.0, a word in backticks -> the word."""
    text = text.strip().strip("`")
    number = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*(?:s|h|%)?", text)
    return float(number.group(1)) if number else text


def stated_defaults() -> list[tuple[str, str, str]]:
    """``(page:line, key, stated)`` of every default the hand-written pages state."""
    out = []
    for page in sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md"]):
        rel = str(page.relative_to(REPO))
        if rel in GENERATED:
            continue
        for number, line in enumerate(page.read_text().splitlines(), 1):
            prose = re.sub(r"``.*?``", "", line)  # not a pattern shown as code
            for pattern, key, value in STATED:
                out += [(f"{rel}:{number}", m[key], m[value]) for m in pattern.finditer(prose)]
    return out


def test_the_pages_state_defaults_to_check() -> None:
    keys = {key for _, key, _ in stated_defaults()}
    stated = {"stopGracePeriodSeconds", "queueTimeoutHours", "spotDiscount", "checkpointEverySeconds", "timeoutHours"}
    assert stated | {"collectiveTimeoutSeconds"} <= keys, keys


def test_each_default_a_page_states_is_the_one_the_program_applies() -> None:
    defaults = model_defaults()
    problems = []
    for where, key, stated in stated_defaults():
        if key not in defaults:
            problems.append(f"{where}: `{key}` is no config key")
            continue
        applied = [v for v in defaults[key] if v is not None]
        if not applied:
            if key not in APPLIED:
                problems.append(f"{where}: `{key}` defaults to nothing in its model: say in APPLIED what applies")
                continue
            applied = [APPLIED[key]()]
        want = _value(stated)
        if not any(want == v or (isinstance(v, (int, float)) and want == float(v)) for v in applied):
            problems.append(f"{where}: `{key}` (default {stated}), but the program applies {sorted(map(str, applied))}")
    assert problems == [], "\n".join(problems)


def kueue_timeout_statements() -> list[tuple[str, str, list[str]]]:
    """(page, sentence, durations) of each sentence of the pages about Kueue's waitForPodsReady or a job it stops
    whole, with the durations it states (``20 minutes``, ``1200 s``, ``past 20,``)."""
    out = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        text = " ".join(page.read_text().split())
        for sentence in re.split(r"(?<=[.|])\s", text):
            if not re.search(r"waitForPodsReady|whole job|stopped whole", sentence):
                continue
            found = re.findall(r"\b(\d+) minutes\b|\b(\d+) s\b|\bpast (\d+),", sentence)
            durations = [m if m else f"{s} s" if s else p for m, s, p in found]
            if durations:
                out.append((str(page.relative_to(REPO)), sentence, durations))
    return out


def test_the_pages_state_kueues_pods_ready_timeout_as_the_program_sets_it() -> None:
    """The pages say how long Kueue waits for a job's pods (``waitForPodsReady``'s timeout, and its recovery timeout,
    which defaults to it) in minutes or seconds: the value ``PODS_READY_TIMEOUT_S`` sets, and the requeue backoff the
    values beside it. EKS's eviction limit shares a sentence with them in places."""
    from components.catalog.platform import EVICTION_LIMIT_MINUTES
    from stacks.plan.queues import PODS_READY_TIMEOUT_S, REQUEUE_BACKOFF_BASE_S, REQUEUE_BACKOFF_MAX_S

    allowed = {str(PODS_READY_TIMEOUT_S // 60), f"{PODS_READY_TIMEOUT_S} s", str(EVICTION_LIMIT_MINUTES)}
    allowed |= {f"{REQUEUE_BACKOFF_BASE_S} s", f"{REQUEUE_BACKOFF_MAX_S} s"}
    statements = kueue_timeout_statements()
    assert len(statements) >= 4, statements
    bad = [f"{page}: {d!r} in {sentence!r}" for page, sentence, ds in statements for d in ds if d not in allowed]
    assert not bad, "\n".join(bad)
