"""Reading a stack's ``Pulumi.<stack>.yaml``: the command-line tools read its settings; under ``pulumi up`` the program
checks only the top-level keys Pulumi would ignore."""

import difflib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import yaml

from components.image.aws_settings import STATIC_KEYS, WEB_IDENTITY_KEY
from stacks.config import NAMESPACE, ConfigError, load_config
from stacks.config.namespaces import REGION_KEY
from stacks.yaml_text import LOADER, load_yaml

if TYPE_CHECKING:
    from stacks.plan import Plan

REPO = Path(__file__).resolve().parent.parent


class StackFileError(Exception):
    """The stack file cannot be read."""


def project_name(stack_file: Path) -> str:
    """The project's name from the ``Pulumi.yaml`` beside the stack file (default ``eks-training``)."""
    project_file = stack_file.parent / "Pulumi.yaml"
    if project_file.exists():
        data = load_yaml(project_file.read_text()) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return NAMESPACE


def stacks_in(folder: Path) -> list[str]:
    """The stacks whose ``Pulumi.<stack>.yaml`` is in ``folder``."""
    return sorted(f.name[len("Pulumi.") : -len(".yaml")] for f in folder.glob("Pulumi.*.yaml"))


def stack_file_for(stack: str) -> Path:
    """``Pulumi.<stack>.yaml`` in the current folder (your Pulumi project), else in this repository (a checkout);
    :class:`StackFileError` naming the stacks that exist when neither has it."""
    folders = list(dict.fromkeys([Path.cwd().resolve(), REPO]))
    for folder in folders:
        if (folder / f"Pulumi.{stack}.yaml").is_file():
            return folder / f"Pulumi.{stack}.yaml"
    where = "; ".join(f"{folder}: {', '.join(stacks_in(folder)) or 'none'}" for folder in folders if folder.is_dir())
    near = _nearest(stack, [s for folder in folders if folder.is_dir() for s in stacks_in(folder)])
    raise StackFileError(
        f"no stack {stack!r}: Pulumi.{stack}.yaml is not in {' or '.join(map(str, folders))}; "
        + (f"did you mean {near!r}? " if near else "")
        + f"the stacks there ({where}); name one of them, or give the file with --stack-file PATH"
    )


def _nearest(name: str, names: list[str]) -> Optional[str]:
    """The stack a mistyped ``name`` most likely meant (another case, or a close spelling), or ``None``."""
    by_case = [n for n in names if n.lower() == name.lower()]
    if by_case:
        return by_case[0]
    close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1, cutoff=0.6)
    return next((n for n in names if close and n.lower() == close[0]), None)


#: The top-level keys of a stack file Pulumi reads (``ProjectStack`` in pulumi/pulumi
#: sdk/go/common/workspace/project.go). Pulumi ignores any other without a word, so the program never sees it: the
#: command-line tools refuse it.
STACK_FILE_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")


#: The settings whose value may be a secret: the AWS provider's credentials, which the program only notes as set
#: (:func:`components.image.aws_settings.aws_settings_from_config`); any other secret is a setting the tools read.
SECRET_SETTINGS = tuple(f"aws:{k}" for k in (*STATIC_KEYS, WEB_IDENTITY_KEY))


def secret_problem(found: list[str], *, offline: bool) -> str:
    """The one message for settings held as secrets (``found``: their keys or paths): the program's own
    (``eks-training:``) it would write into the cluster's objects and the stack's state as plain text. ``offline``:
    said by a command-line tool, which cannot decrypt any secret."""
    where = ", ".join(found)
    plain = (
        "but the program writes this setting as plain text into the cluster's objects and the stack's state, so it "
        "would not stay secret (a job's env is plain text in its pod: no token or password there)"
    )
    if not offline:
        return (
            f"{where}: a secret (pulumi config set --secret), {plain}: set it without --secret. With --path, one "
            "secret value makes its whole setting secret: set that value again without --secret (pulumi config set "
            "--path KEY.PATH VALUE); `python -m stacks plan` names its path"
        )
    unread = "only `pulumi up` and `pulumi preview` decrypt a secret, so this command cannot read it"
    ours = all(f.startswith(f"{NAMESPACE}:") for f in found)
    return (
        f"{where}: a secret (pulumi config set --secret), {plain}; {unread} either: set it without --secret "
        "(pulumi config set KEY VALUE)"
        if ours
        else f"{where}: a secret (pulumi config set --secret): {unread}; to use it, set it without --secret "
        "(pulumi config set KEY VALUE)"
    )


def secret_settings(settings: Mapping[str, Any], is_secret: Callable[[str], bool]) -> list[str]:
    """The program's own settings (``eks-training:``) that Pulumi holds as secrets (``is_secret``:
    :func:`pulumi.runtime.is_config_secret`): the program reads them as plain text."""
    return sorted(k for k in settings if k.startswith(f"{NAMESPACE}:") and is_secret(k))


#: YAML 1.1 tags a plain scalar is never read as here: dates stay strings; `=` ("value") has no constructor in a safe
#: loader, and a plain `=` is a string in YAML 1.2.
_NOT_RESOLVED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")


class _StackFileLoader(LOADER):
    """A stack file as Pulumi reads it (Go's gopkg.in/yaml.v3, YAML 1.2): only true/false are booleans (YAML 1.1's
    yes/no/on/off and dates stay strings, so ``waitForCompletion: yes`` is the string the program refuses, here as
    under ``pulumi up``); numbers as the program receives them (:func:`_number`); and a key
    given twice in one mapping is an error, not a silent override
    (https://yaml.org/spec/1.2.2/#1032-tag-resolution, https://yaml.org/spec/1.2.2/#mapping: keys are unique)."""

    yaml_implicit_resolvers = {
        first: [
            (tag, regexp)
            for tag, regexp in resolvers
            if tag not in (*(f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float")), *_NOT_RESOLVED)
        ]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def get_single_node(self) -> Any:
        """The document as written, its mappings' keys checked before any merge (``<<``) is expanded, as yaml.v3
        checks them: a key written twice, ``<<`` included, is an error; a key a merge also brings is the mapping's
        own (https://yaml.org/type/merge.html)."""
        node = super().get_single_node()
        todo, seen_nodes = [node], set()
        while todo:
            current = todo.pop()
            if current is None or id(current) in seen_nodes or isinstance(current, yaml.ScalarNode):
                continue
            seen_nodes.add(id(current))
            if isinstance(current, yaml.MappingNode):
                _unique_keys(current)
                todo += [n for pair in current.value for n in pair]
            else:
                todo += current.value
        return node


def _unique_keys(node: yaml.MappingNode) -> None:
    seen: dict[str, Any] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        name = key_node.value  # yaml.v3 compares a key's text, not its type: `1` and "1" are one key
        if name in seen:
            raise yaml.composer.ComposerError(
                f"while reading a mapping (line {node.start_mark.line + 1})",
                node.start_mark,
                f"the key {key_node.value!r} is given twice (first on line {seen[name].line + 1}); Pulumi refuses "
                "the file: merge the two entries into one",
                key_node.start_mark,
            )
        seen[name] = key_node.start_mark


_StackFileLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
#: A plain scalar that may be a number to yaml.v3: it starts with a sign, a digit or a dot (its ``resolveTable``).
_NUMBER_LIKE = re.compile(r"^[-+0-9.][-+0-9A-Za-z_.]*$")
#: Go's integer syntax for ``strconv.ParseInt(s, 0, 64)`` once yaml.v3 dropped the ``_``: a prefix's base, else a
#: leading zero's octal (YAML 1.1's, which yaml.v3 keeps), else decimal.
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
#: yaml.v3's ``yamlStyleFloat``; a scalar starting with a dot is read with ``strconv.ParseFloat`` alone.
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_PREFIX_BASES = {"0x": 16, "0b": 2, "0o": 8}
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
#: The largest float Go's encoding/json writes without an exponent (``floatEncoder``: 'f' below 1e21).
_JSON_PLAIN_FLOAT_LIMIT = 1e21


def _number(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> Any:
    """A plain scalar that starts like a number, as the program receives it under ``pulumi up``: yaml.v3's
    ``resolve()`` reads it (go-yaml/yaml v3 resolve.go: ``ParseInt(s, 0, 64)`` without the ``_``, then
    ``yamlStyleFloat``), and Pulumi passes the value on as JSON, where a whole float below 1e21 is written without a
    fraction, so the program reads an int (``1e3`` and ``1.0`` are 1000 and 1). What yaml.v3 keeps as text stays text
    (``1:30``, YAML 1.1's base 60), and so do infinities and NaN, which Pulumi cannot pass as JSON."""
    text = str(loader.construct_scalar(node))
    if text.startswith("."):
        return _passed(text, float(text)) if _DOT_FLOAT.fullmatch(text) else text
    plain = text.replace("_", "")
    m = _GO_INT.fullmatch(plain)
    if m is not None:
        sign, digits = m.groups()
        prefix = digits[:2].lower()
        if prefix in _PREFIX_BASES:
            value = int(digits[2:], _PREFIX_BASES[prefix])
        else:
            value = int(digits, 8 if digits.startswith("0") else 10)
        value = -value if sign == "-" else value
        if -(1 << 63) <= value < (1 << 64):  # ParseInt's range, else ParseUint's
            return value
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        return _passed(text, float(plain))
    return text


def _passed(text: str, value: float) -> Any:
    """A float as the program receives it through Pulumi's JSON: a whole one below 1e21 as an int; one out of a
    float64's range stays ``text`` (Go's ``ParseFloat`` fails, so yaml.v3 keeps the text)."""
    if not math.isfinite(value):
        return text
    if value.is_integer() and abs(value) < _JSON_PLAIN_FLOAT_LIMIT:
        return int(value)
    return value


_NUMBER_TAG = "tag:eks-training,2026:number"
_StackFileLoader.add_implicit_resolver(_NUMBER_TAG, _NUMBER_LIKE, list("-+0123456789."))
_StackFileLoader.add_constructor(_NUMBER_TAG, _number)


def stray_top_level_keys(project_dir: Path, stack: str, settings: Mapping[str, Any]) -> list[str]:
    """Under ``pulumi up``: the problem of the stack file's top-level keys that Pulumi ignores, so the program would
    never see them. The file is ``Pulumi.<stack>.yaml`` in the project's ``stackConfigDir`` (default its folder,
    pulumi/pulumi sdk/go/common/workspace/paths.go); none when it is not there, when Pulumi itself refuses it, or when
    its settings are not the ones Pulumi passed (``--config-file``, a stack whose settings live in Pulumi Cloud)."""
    try:
        project = load_yaml((project_dir / "Pulumi.yaml").read_text())
        config_dir = project.get("stackConfigDir") if isinstance(project, dict) else None
        path = project_dir / (config_dir if isinstance(config_dir, str) else "") / f"Pulumi.{stack}.yaml"
        data = load_stack_yaml(path.read_text())
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, dict) or not set(data.get("config") or {}) <= set(settings):
        return []
    problem = top_level_problem(data)
    return [f"{path.name}: {problem}"] if problem else []


def top_level_problem(data: Mapping[Any, Any]) -> Optional[str]:
    """The problem of a stack file's top-level keys that Pulumi does not read (a setting written outside ``config:``,
    or a misspelt key), if any."""
    keys = [str(k) for k in data if k not in STACK_FILE_KEYS]
    if not keys:
        return None
    settings = [k for k in keys if ":" in k]
    if settings:
        return (
            f"{', '.join(settings)} {'is' if len(settings) == 1 else 'are'} at the top level, where Pulumi reads no "
            f"setting: indent {'it' if len(settings) == 1 else 'them'} under config:"
        )
    near = {k: difflib.get_close_matches(k, STACK_FILE_KEYS, n=1, cutoff=0.6) for k in keys}
    hints = [f"{k} (did you mean {near[k][0]}?)" if near[k] else k for k in keys]
    return (
        f"unknown top-level key {', '.join(hints)}: a stack file holds only {', '.join(STACK_FILE_KEYS)} "
        "(the settings go under config:); rename or remove it"
    )


def load_stack_yaml(text: str) -> Any:
    """A stack file's YAML as Pulumi reads it (:class:`_StackFileLoader`)."""
    return yaml.load(text, Loader=_StackFileLoader)


def yaml_problem(exc: Exception, text: str) -> str:
    """A YAML error in ``text`` as one line: where (line, column) and what, with the fix for a tab there (YAML
    indents with spaces)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return str(exc)
    mark = exc.problem_mark
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    tab = "tab" in (exc.problem or "") or line[mark.column : mark.column + 1] == "\t"
    fix = "; indent with spaces (YAML does not allow tabs in indentation)" if tab else ""
    return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}{fix}"


def project_config(project_file: Path) -> dict[str, Any]:
    """The values a project's ``Pulumi.yaml`` gives every stack, keyed as Pulumi passes them: a key without a
    namespace is the project's (``<project>:<key>``) and gives its ``default``; a namespaced key gives its ``value``
    (a plain value is either, https://www.pulumi.com/docs/iac/concepts/config/#project-level-configuration)."""
    try:
        text = project_file.read_text()
        data = load_stack_yaml(text) or {}  # Pulumi reads Pulumi.yaml with yaml.v3 too
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StackFileError(f"cannot read {project_file}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise StackFileError(f"cannot read {project_file}: {yaml_problem(exc, text)}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        return {}
    project = str(data.get("name") or NAMESPACE)
    out: dict[str, Any] = {}
    for k, spec in data["config"].items():
        full = str(k) if ":" in str(k) else f"{project}:{k}"
        field = "value" if ":" in str(k) else "default"
        if isinstance(spec, dict):
            if field in spec:
                out[full] = spec[field]
            elif "value" in spec:
                out[full] = spec["value"]
        else:
            out[full] = spec
    return out


def read_stack_config(stack: str, stack_file: Optional[Path] = None) -> tuple[Path, dict[str, Any]]:
    """The stack file's path and the configuration the program gets from it (its ``config:`` mapping over the values
    of the ``Pulumi.yaml`` beside it), as ``pulumi up`` passes them; ``Pulumi.<stack>.yaml`` by
    :func:`stack_file_for` by default."""
    path = stack_file or stack_file_for(stack)
    try:
        text = path.read_text()
        data = load_stack_yaml(text)
    except OSError as exc:
        raise StackFileError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise StackFileError(f"cannot read {path}: {yaml_problem(exc, text)}") from exc
    if data is not None and not isinstance(data, dict):
        raise StackFileError(
            f"{path}: a stack file is a YAML mapping (config: with <namespace>:<key> entries), not "
            f"{type(data).__name__} {data!r:.60}; write `config:` and the stack's keys under it"
        )
    if problem := top_level_problem(data or {}):
        raise StackFileError(f"{path}: {problem}")
    config = (data or {}).get("config")
    if config is not None and not isinstance(config, dict):
        raise StackFileError(
            f"{path}: config: must be a mapping of <namespace>:<key>: value (e.g. `aws:region: us-east-1`), not "
            f"{type(config).__name__} {config!r:.60}"
        )
    found = [w for k, v in (config or {}).items() if k not in SECRET_SETTINGS for w in secret_paths(v, str(k))]
    if found:
        raise StackFileError(f"{path}: {secret_problem(found, offline=True)}")
    return path, {**project_config(path.parent / "Pulumi.yaml"), **(config or {})}


def secret_paths(value: Any, where: str) -> list[str]:
    """Where ``value`` (a setting's value at ``where``) holds a secret: Pulumi writes one as ``{secure: <cipher>}``,
    at the top of a setting or inside it (``pulumi config set --secret --path``)."""
    if isinstance(value, dict):
        if set(value) == {"secure"} and isinstance(value["secure"], str):
            return [where]
        return [p for k, v in value.items() for p in secret_paths(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in secret_paths(v, f"{where}[{i}]")]
    return []


class StackLoadError(Exception):
    """A stack that cannot be planned: its text is what the command-line tools print (then exit 2)."""


def plan_stack(
    stack: str,
    stack_file: Optional[Path] = None,
    *,
    region: Optional[str] = None,
    edit: Optional[Callable[[dict[str, Any]], None]] = None,
) -> tuple[dict[str, Any], "Plan"]:
    """The stack's configuration and plan, offline, as ``pulumi up`` validates it: the stack file read (``region``
    replaces its ``aws:region``; ``edit`` changes the configuration as an edit of the stack file would), loaded and
    planned (no Pulumi runtime: :func:`stacks.config.load_config` is a function of the configuration). Raises
    :class:`StackLoadError` with the message to print (``error: cannot read ...``, or every problem of the
    configuration)."""
    from stacks.plan import build_plan  # the plan package's CLI imports this module

    try:
        path, config = read_stack_config(stack, stack_file)
    except StackFileError as exc:
        raise StackLoadError(f"error: {exc}") from exc
    if region:
        config[REGION_KEY] = region
    if edit is not None:
        edit(config)
    from stacks.plan.admission import topology_region_problems

    try:
        plan = build_plan(load_config(project_name(path), stack, config, project_dir=path.parent.resolve()))
        where = config.get(REGION_KEY)
        if isinstance(where, str) and (problems := topology_region_problems(plan, where)):
            raise ConfigError(problems)  # as the program does (__main__.py)
        return config, plan
    except ConfigError as exc:
        raise StackLoadError(exc.offline) from exc
