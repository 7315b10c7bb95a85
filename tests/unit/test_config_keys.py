"""Every config key is read or refused, and the configuration's messages name the
fix.

A key under a namespace nothing reads (``jobs:`` without one, a typo ``eks-trainig:jobs``, ``research:jobs``, which is
what ``pulumi config set jobs`` writes in a project named ``research``) would be ignored: the program would build an
environment without the user's jobs. Each is refused with the key the program reads, before any resource, by the
program under ``pulumi up`` (mocks), by ``python -m stacks.plan`` and by ``python -m stacks.local``, from a stack file
or from the project's ``Pulumi.yaml``.
"""

import copy
import re
import typing
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from stacks.config.base import RESERVED_NAMESPACES, relative_path_problem, volume_path_problem
from stacks.config.loader import ENTRIES, SECTIONS, _Parser
from stacks.config.tree import ENTRY, model_tables, section_keys
from stacks.docs import configuration_reference
from stacks.docs.config_reference import section_entry
from stacks.local.cli import main as local_main
from stacks.plan.report import main as plan_main
from tests.harness import PROJECT, stack_names

JOBS = {"train": {"kind": "command", "nodeGroup": "cpu", "command": ["python", "-c", "print('trained')"]}}
GROUPS = {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2}}

# (id, project name, the key as written, the problem's text: the key, why it is not read and the key to write)
UNREAD = [
    (
        "no namespace",
        PROJECT,
        "jobs",
        "jobs: a key without a namespace; Pulumi reads a stack file's keys as <namespace>:<key> (`pulumi up` refuses "
        "this file) and this program reads eks-training:<key> (and aws: its provider reads); rename it "
        "eks-training:jobs",
    ),
    (
        "misspelt namespace",
        PROJECT,
        "eks-trainig:jobs",
        "eks-trainig:jobs: nothing reads the eks-trainig: namespace, so this key would be ignored; did you mean "
        "eks-training:jobs? this program reads eks-training:<key>",
    ),
    (
        "the project's own namespace",
        "research",
        "research:jobs",
        "research:jobs: nothing reads the project's namespace research: (`pulumi config set jobs` writes there in "
        "project research); this program reads eks-training:<key> (and aws: its provider reads): rename it "
        "eks-training:jobs (pulumi config set --path 'eks-training:jobs' ...)",
    ),
]


def _quiet(main: Callable[[Optional[Sequence[str]]], int], args: list[str]) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def _project(folder: Path, name: str, config: dict[str, Any], project_config: Optional[dict[str, Any]] = None) -> Path:
    """A Pulumi project named ``name`` in ``folder`` with stack ``mine``; returns the stack file."""
    folder.mkdir(parents=True, exist_ok=True)
    project: dict[str, Any] = {"name": name, "runtime": "python"}
    if project_config:
        project["config"] = project_config
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump(project))
    path = folder / "Pulumi.mine.yaml"
    path.write_text(
        yaml.safe_dump({"config": {"aws:region": "us-east-1", "eks-training:nodeGroups": GROUPS, **config}})
    )
    return path


@pytest.mark.parametrize("project,written,message", [pytest.param(p, k, m, id=i) for i, p, k, m in UNREAD])
@pytest.mark.parametrize("command", ["stacks.plan", "stacks.local"])
def test_the_tools_refuse_a_key_of_a_stack_file_they_do_not_read(
    tmp_path: Path, command: str, project: str, written: str, message: str
) -> None:
    stack_file = _project(tmp_path / "project", project, {written: JOBS})
    main = plan_main if command == "stacks.plan" else local_main
    code, out, err = _quiet(
        main,
        [
            "--stack",
            "mine",
            "--stack-file",
            str(stack_file),
            *(["--work", str(tmp_path / "work")] if command == "stacks.local" else []),
        ],
    )
    assert code == 2 and out == "", (out, err)
    assert "invalid stack configuration (1 problem(s)):\n" in err and message in err and "no resource" not in err, err
    assert not (tmp_path / "work").exists()  # the local runner started nothing


def test_the_tools_refuse_a_key_a_project_file_gives_that_nothing_reads(tmp_path: Path) -> None:
    """Project-level config (Pulumi.yaml's ``config:``): a key without a namespace is the project's own, so in project
    ``research`` a default for ``jobs`` is ``research:jobs``, which nothing reads; a namespaced value is read as
    ``pulumi up`` passes it (https://www.pulumi.com/docs/iac/concepts/config/#project-level-configuration)."""
    stack_file = _project(tmp_path / "p", "research", {}, {"jobs": {"default": JOBS}})
    code, _, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(stack_file)])
    assert code == 2 and "research:jobs: nothing reads the project's namespace research:" in err, err
    read = _project(tmp_path / "q", "research", {}, {"eks-training:jobs": {"value": JOBS}})
    code, out, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(read)])
    assert code == 0 and "1. train (command) on cpu" in out, (out, err)


# --- messages that name the fix ---------------------------------------------------------------------------------


def _plan_problems(tmp_path: Path, config: dict[str, Any]) -> list[str]:
    stack_file = _project(tmp_path, "eks-training", config)
    code, _, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(stack_file)])
    assert code == 2, err
    return [line[4:] for line in err.splitlines() if line.startswith("  - ")]


MESSAGES = [
    (
        "after a job a one-job stack does not have",
        {"eks-training:jobs": {"train": {**JOBS["train"], "after": ["prepare"]}}},
        "eks-training:jobs.train.after[0]: 'prepare' is not a job; this stack has no other job: remove it, or define "
        "the job prepare under eks-training:jobs",
    ),
    (
        "a misspelt top-level key",
        {"eks-training:nodegroup": {}},
        "eks-training:nodegroup: unknown key; did you mean nodeGroups? rename it; valid keys are",
    ),
    (
        "a section's key written on top",
        {"eks-training:kubernetesVersion": "1.34"},
        "eks-training:kubernetesVersion: unknown key; did you mean eks-training:cluster.kubernetesVersion? move it "
        "there; valid keys are",
    ),
    (
        "an entry's key written on top",
        {"eks-training:instanceTypes": ["m5.xlarge"]},
        "eks-training:instanceTypes: unknown key; did you mean eks-training:nodeGroups.<name>.instanceTypes? move it "
        "there;",
    ),
    (
        "a job's key written on top, spelt like a section",
        {"eks-training:args": ["--epochs", "1"]},
        "eks-training:args: unknown key; did you mean eks-training:jobs.<name>.args? move it there;",
    ),
    (
        "the AWS provider's setting in the program's namespace",
        {"eks-training:region": "us-east-1"},
        "eks-training:region: unknown key; did you mean aws:region? move it there; valid keys are",
    ),
    (
        "a relative script without a code folder, not in the image",
        {"eks-training:jobs": {"train": {"kind": "pytorch", "nodeGroup": "cpu", "script": "mlp.py"}}},
        "eks-training:jobs.train.script: 'mlp.py' is not a file of the image training (its ",
    ),
    (
        "a relative script of the image, misspelt",
        {"eks-training:jobs": {"train": {"kind": "pytorch", "nodeGroup": "cpu", "script": "trian.py"}}},
        "eks-training:jobs.train.script: 'trian.py' is not a file of the image training (its ",
    ),
    (
        "a value below its range",
        {"eks-training:jobs": {"train": {**JOBS["train"], "nodes": 0}}},
        "eks-training:jobs.train.nodes: 0 is below the minimum 1; set it to 1 or more",
    ),
    (
        "a value above its range",
        {"eks-training:jobs": {"train": {**JOBS["train"], "maxRestarts": 500}}},
        "eks-training:jobs.train.maxRestarts: 500 is above the maximum 100; set it to 100 or less",
    ),
    (
        "a boolean written as a word",
        {"eks-training:jobs": {"train": {**JOBS["train"], "tensorboard": "yes"}}},
        "eks-training:jobs.train.tensorboard: 'yes' would be a folder named yes; write true (event files in "
        "<output>/tensorboard, served by TensorBoard), false, or a folder relative to the job's output folder",
    ),
]


@pytest.mark.parametrize("config,message", [pytest.param(c, m, id=i) for i, c, m in MESSAGES])
def test_a_mistake_gets_a_message_with_its_fix(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    problems = _plan_problems(tmp_path, config)
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_a_relative_script_without_code_names_the_fix_and_one_of_the_image_is_taken(tmp_path: Path) -> None:
    """Without `code`, a relative script is read in the image's /app: a user's own script there is refused with the
    code folder to set (torchrun would fail on the cluster), a near name is suggested, and a script the image has
    (train.py of training/) passes."""
    job = {"kind": "pytorch", "nodeGroup": "cpu"}
    (own,) = _plan_problems(tmp_path / "own", {"eks-training:jobs": {"train": {**job, "script": "mlp.py"}}})
    assert own.endswith(
        "and the job has no code folder; set eks-training:jobs.train.code to the folder of your program (uploaded for "
        "the job, the script relative to it), or give an absolute path in the image"
    ), own
    (typo,) = _plan_problems(tmp_path / "typo", {"eks-training:jobs": {"train": {**job, "script": "trian.py"}}})
    assert "; did you mean train.py? or set eks-training:jobs.train.code" in typo, typo
    stack_file = _project(
        tmp_path / "ok", "eks-training", {"eks-training:jobs": {"train": {**job, "script": "train.py"}}}
    )
    code, _, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(stack_file)])
    assert code == 0, err
    in_s3 = {**job, "script": "mlp.py", "code": "s3://team-code/mlp/"}  # the script is in the upload, not the image
    stack_file = _project(tmp_path / "s3", "eks-training", {"eks-training:jobs": {"train": in_s3}})
    code, _, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(stack_file)])
    assert code == 0, err


@pytest.mark.parametrize("namespace", RESERVED_NAMESPACES)
def test_the_training_namespace_is_not_one_that_exists_before_the_stack(tmp_path: Path, namespace: str) -> None:
    """The stack creates its training namespace (storage.namespace): one of Kubernetes' own, or of a controller it
    installs, exists already, and ``pulumi up`` would fail creating it (and apply the jobs' pod security labels and
    default-deny network policies to it, and delete it on destroy). The plan accepted ``kube-system``."""
    problems = _plan_problems(
        tmp_path, {"eks-training:nodeGroups": GROUPS, "eks-training:storage": {"namespace": namespace}}
    )
    assert len(problems) == 1 and problems[0].startswith(
        f"eks-training:storage.namespace: {namespace!r} is a namespace of Kubernetes or of a controller"
    ), problems


#: A valid entry of each map section whose entries are names the loader checks (the name is the only thing changed).
NAMED_ENTRIES: dict[str, Any] = {
    "nodeGroups": GROUPS["cpu"],
    "jobs": JOBS["train"],
    "images": {"prebuilt": "public.ecr.aws/docker/library/python:3.11-slim"},
    "datasets": {},
    "teams": {"quotaPercent": 10},
}


def _documented_entry_names() -> dict[str, tuple[int, str]]:
    """section -> (the longest name, the first character class) as docs/reference/configuration.md states them."""
    out, section = {}, ""
    for line in configuration_reference().splitlines():
        if line.startswith("## "):
            section = line[3:]
        m = re.match(
            r"Entry names: 1-(\d+) lowercase letters, digits and '-', starting (with a letter or digit|with a "
            r"letter|and ending with a letter or digit)",
            line,
        )
        if m:
            out[section] = (int(m.group(1)), "letter" if m.group(2) == "with a letter" else "letter or digit")
    return out


@pytest.mark.parametrize("section", sorted(NAMED_ENTRIES))
def test_the_references_entry_names_are_what_the_loader_accepts(tmp_path: Path, section: str) -> None:
    """The reference said teams' names were "EC2 instance type names" (the sentence of instanceFacts): the longest
    name it documents is accepted, one more character is refused, and a leading digit is as documented."""
    longest, first = _documented_entry_names()[section]

    def config(name: str) -> dict[str, Any]:
        if section == "nodeGroups":
            return {"eks-training:nodeGroups": {name: NAMED_ENTRIES[section]}}
        if section == "jobs":
            return {"eks-training:jobs": {name: NAMED_ENTRIES[section]}}
        return {f"eks-training:{section}": {name: NAMED_ENTRIES[section]}, "eks-training:jobs": JOBS}

    stack_file = _project(tmp_path / "ok", "eks-training", config("a" * longest))
    code, out, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(stack_file)])
    assert code == 0, err
    problems = _plan_problems(tmp_path / "long", config("a" * (longest + 1)))
    assert len(problems) == 1 and problems[0].startswith(f"eks-training:{section}."), problems
    digit = _project(tmp_path / "digit", "eks-training", config("0" + "a" * (longest - 1)))
    code, _, err = _quiet(plan_main, ["--stack", "mine", "--stack-file", str(digit)])
    assert (code == 0) == (first == "letter or digit"), err


def test_an_unknown_stack_lists_the_stacks_that_exist(tmp_path: Path) -> None:
    code, out, err = _quiet(plan_main, ["--stack", "nosuch"])
    assert code == 2 and out == ""
    assert "error: no stack 'nosuch': Pulumi.nosuch.yaml is not in" in err, err
    assert f": {', '.join(stack_names())});" in err, err  # every preset, in order
    assert "give the file with --stack-file PATH" in err
    assert "did you mean" not in err  # nothing near nosuch


@pytest.mark.parametrize(
    "typed, meant", [("Dev", "dev"), ("dve", "dev"), ("p5e", "p5en"), ("mpi-horovd", "mpi-horovod"), ("g7", None)]
)
def test_a_mistyped_stack_names_the_one_it_likely_meant(typed: str, meant: Optional[str]) -> None:
    code, out, err = _quiet(plan_main, ["--stack", typed])
    assert code == 2 and out == "", err
    assert (f"; did you mean {meant!r}? the stacks there" in err) if meant else ("did you mean" not in err), err


def _models() -> list[type[BaseModel]]:
    """Every model a stack's configuration holds, nested ones included."""
    seen: list[type[BaseModel]] = []
    todo = [m for s in SECTIONS if (m := section_entry(s)[2]) is not None]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo += [a for a in _members(field.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return seen


def _members(annotation: Any) -> list[Any]:
    """The types an annotation names (through Optional, unions, lists and maps)."""
    args = typing.get_args(annotation)
    return [annotation] if not args else [m for a in args for m in _members(a)]


def _optional_objects() -> list[tuple[type[BaseModel], str, str]]:
    """(model, field, key) of every optional object key: ``key:`` with nothing after it would read as absent."""
    return [
        (model, name, field.alias or name)
        for model in _models()
        for name, field in model.model_fields.items()
        if type(None) in typing.get_args(field.annotation)
        and any(isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(field.annotation))
    ]


def test_the_walk_finds_the_optional_objects() -> None:
    """The control: the three keys of today are found, so the check below covers a fourth one added later."""
    found = {(m.__name__, k) for m, _, k in _optional_objects()}
    assert {("JobConfig", "healthCheck"), ("NodeGroupConfig", "nodeRepair"), ("StorageConfig", "fsx")} <= found


@pytest.mark.parametrize(
    "model,name,key", [pytest.param(*o, id=f"{o[0].__name__}.{o[2]}") for o in _optional_objects()]
)
def test_an_object_key_left_empty_is_refused_not_read_as_absent(model: type[BaseModel], name: str, key: str) -> None:
    """``healthCheck:`` with nothing after it is YAML null: the user meant the object (``{}`` for its defaults), so
    the key is refused with that fix, as a required key left empty is, never read as unset."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate({key: None})
    mine = [e for e in caught.value.errors() if e["loc"] == (key,)]
    assert mine and "write {} to set it with its defaults, or remove the key" in str(mine[0]["ctx"]["error"]), mine


def test_a_disabled_default_provider_is_refused_only_where_the_program_uses_it() -> None:
    """A jobs-only stack makes no cluster (no eks provider); a stack with every image prebuilt builds none (no
    pulumi-python provider); aws is used by every stack."""
    from stacks.config.namespaces import disabled_providers_problem

    def problem(disabled: list[str], *, makes_cluster: bool = True, builds_images: bool = True) -> str:
        config = {"pulumi:disable-default-providers": disabled}
        return disabled_providers_problem(config, makes_cluster=makes_cluster, builds_images=builds_images) or ""

    assert problem(["eks"], makes_cluster=False) == ""
    assert problem(["pulumi-python"], builds_images=False) == ""
    assert problem(["kubernetes", "random"]) == ""
    assert "(eks disabled); remove eks from it" in problem([" eks "])  # the engine trims each entry
    only_aws = problem(["*"], makes_cluster=False, builds_images=False)
    assert only_aws == (
        "pulumi:disable-default-providers: this program makes its AWS resources with the default aws provider (set "
        "by the stack's aws: settings), so `pulumi up` would refuse them (aws disabled); remove * from it"
    )


def test_a_reserved_variable_names_a_setting_of_the_job() -> None:
    """The refusal of a reserved ``env`` name points to the job's setting it comes from: each is a key of a job."""
    from stacks.config.jobs import RESERVED_ENV, RESERVED_FROM, JobConfig

    keys = {f.alias or name for name, f in JobConfig.model_fields.items()}
    assert set(RESERVED_FROM) <= RESERVED_ENV
    assert sorted(set(RESERVED_FROM.values()) - keys) == []


def test_a_key_one_kind_reads_is_refused_on_the_others() -> None:
    """A job key documented as one kind's (``pytorch: ...``) is among that kind's ``owned_fields``, so a job of another
    kind that sets it is refused rather than silently ignored. minNodes and maxNodes are the elastic kinds': the
    job's own check refuses a range on the others."""
    from stacks.config.jobs import JobConfig
    from stacks.kinds import KINDS

    elastic_range = {"min_nodes", "max_nodes"}
    unowned = []
    for name, field in JobConfig.model_fields.items():
        kinds = [k for k in re.findall(r"\b(\w+): ", field.description or "") if k in KINDS]
        if len(kinds) == 1 and (field.description or "").startswith(f"{kinds[0]}: ") and name not in elastic_range:
            if name not in {f.field for f in KINDS[kinds[0]].owned_fields}:
                unowned.append(f"{name} ({kinds[0]})")
    assert not unowned, f"add an OwnedField to the kind's owned_fields (stacks/kinds/<kind>.py): {', '.join(unowned)}"


def test_only_a_folder_of_the_volume_gets_the_data_hint() -> None:
    """``/data/...`` is how the pods see a folder of the shared volume: an ``outputDir`` or a dataset's ``path``
    written so names the relative value; a path relative to elsewhere (an output folder, the repository) does not."""
    assert volume_path_problem("/data/runs/exp") == (
        "'/data/runs/exp' must be a relative path inside the shared volume: drop the leading /data/, 'runs/exp'"
    )
    assert volume_path_problem("/data/../etc") == "'/data/../etc' must be a relative path inside the shared volume"
    assert volume_path_problem("runs/exp") is None
    assert relative_path_problem("/data/runs/exp") == (
        "'/data/runs/exp' must be a relative path inside the shared volume"
    )


def test_every_key_of_a_section_written_on_top_is_named_where_it_belongs() -> None:
    """A key of any section or entry written at the top level (``eks-training:natGateways``) names its full key,
    even where a section is spelt alike (``args`` is a job's key, not a misspelt ``tags``)."""
    keys = section_keys(SECTIONS, ENTRIES)
    assert ("kubernetesVersion", "cluster.kubernetesVersion") in keys and len(keys) > 100
    assert not {name for name, _ in keys} & set(SECTIONS)  # no key is also a section's name
    checked = 0
    for name, path in keys:
        parser = _Parser()
        parser.sections({name: "1"})
        (problem,) = parser.problems
        assert problem.startswith(f"eks-training:{name}: unknown key; did you mean "), problem
        elsewhere = [p for n, p in keys if n == name]  # the message names at most three
        assert f"eks-training:{path}" in problem or len(elsewhere) > 3, problem
        checked += 1
    assert checked > 100


# --- a switch turned off, with its settings still written ---------------------------------------------------------

#: The entry each map section's switches are written under in the stack of ``_project``.
_ENTRY_OF = {"jobs": "train", "nodeGroups": "cpu"}


def _switched_settings() -> list[tuple[str, str, Any]]:
    """(path, key, value) of every setting beside an ``enabled`` switch: a value of its own the model takes."""
    roots = [(s, kind) for s, kind in SECTIONS.items() if isinstance(kind, type) and issubclass(kind, BaseModel)]
    roots += [(f"{s}.{ENTRY}", entry) for s, entry in ENTRIES.items()]
    found = []
    for root, model in roots:
        for path, m in model_tables(root, model):
            if "enabled" not in m.model_fields:
                continue
            for name, field in m.model_fields.items():
                if name == "enabled":
                    continue
                key = field.alias or name
                value = next(v for v in (field.default, 1, 1 << 20) if v is not None and _takes(m, key, v))
                found.append((path, key, value))
    return found


def _takes(model: type[BaseModel], key: str, value: Any) -> bool:
    try:
        model.model_validate({key: value})
    except ValidationError:
        return False
    return True


def test_the_walk_finds_the_switched_settings() -> None:
    """The control: today's switches with settings are found, so the check below covers one added later."""
    found = {(p, k) for p, k, _ in _switched_settings()}
    assert {
        ("jobs.<name>.healthCheck", "enforce"),
        ("nodeGroups.<name>.nodeRepair", "maxParallelNodes"),
        ("operations.idleGpuAlarm", "minutes"),
    } <= found, found


@pytest.mark.parametrize("path,key,value", [pytest.param(p, k, v, id=f"{p}.{k}") for p, k, v in _switched_settings()])
def test_a_setting_under_a_switch_turned_off_is_reported(tmp_path: Path, path: str, key: str, value: Any) -> None:
    """``enabled: false`` beside a setting: nothing reads the setting, so it is refused naming it, never ignored."""
    config: dict[str, Any] = copy.deepcopy({"eks-training:jobs": JOBS, "eks-training:nodeGroups": GROUPS})
    section = path.split(".")[0]
    written = path.replace(ENTRY, _ENTRY_OF.get(section, ENTRY))
    node = config.setdefault(f"eks-training:{section}", {})
    for part in written.split(".")[1:]:
        node = node.setdefault(part, {})
    node.update({"enabled": False, key: value})
    problems = _plan_problems(tmp_path, config)
    assert any(p.startswith(f"eks-training:{written}.{key}: ") for p in problems), problems
