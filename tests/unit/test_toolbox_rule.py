"""An image built from a folder of one's own (a copy of training/, to add packages) must still hold the project's
scripts its pods run: the configuration is refused when its Dockerfile does not put them in /app (the helpers' in the
``training`` image, the toolbox; a pytorch job's launcher and torchrun wrapper; the modules they import). A copy made
from an earlier version of this project lacks the scripts added since (``stacks.config.rules.images``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from stacks.config import ConfigError, load_config
from tests.harness import PROJECT, REPO, stack_config
from tests.variants import P

#: The MPI preset: datasets, jobs with ``after``, MPI launchers (and so every helper but the code download's).
STACK = "mpi-horovod"
OWN = "my-training"


def _project(tmp_path: Path, edit: Any = None) -> Path:
    """A Pulumi project whose ``my-training`` folder is a copy of this version's training/, edited by ``edit``."""
    shutil.copytree(REPO / "training", tmp_path / OWN, ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        edit(tmp_path / OWN)
    return tmp_path


def _load(project: Path) -> Any:
    cfg = stack_config(STACK)
    cfg[P + "images"] = {**(cfg.get(P + "images") or {}), "training": {"context": OWN}}
    return load_config(PROJECT, STACK, cfg, project_dir=project)


def _without(name: str, *, file: bool = True, copy_line: bool = True) -> Any:
    def edit(folder: Path) -> None:
        if file:
            (folder / name).unlink()
        if copy_line:
            dockerfile = folder / "Dockerfile"
            dockerfile.write_text(re.sub(rf" {re.escape(name)}\b", "", dockerfile.read_text()))

    return edit


def test_a_copy_of_this_versions_training_folder_is_taken(tmp_path: Path) -> None:
    assert _load(_project(tmp_path)).images["training"].context == OWN


def _linked_in(let_in: bool) -> Any:
    """wait_for_workers.py a link to waits.py in the folder, which .dockerignore lets in (or not)."""

    def edit(folder: Path) -> None:
        (folder / "wait_for_workers.py").rename(folder / "waits.py")
        (folder / "wait_for_workers.py").symlink_to("waits.py")
        if let_in:
            ignore = folder / ".dockerignore"
            ignore.write_text(ignore.read_text() + "!waits.py\n")

    return edit


def test_a_link_to_a_file_the_build_has_is_taken(tmp_path: Path) -> None:
    assert _load(_project(tmp_path, _linked_in(True))).images["training"].context == OWN


def test_a_link_to_a_file_dockerignore_leaves_out_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wait_for_workers.py .*: a link to a file the build does not have"):
        _load(_project(tmp_path, _linked_in(False)))


def _linked_out(name: str) -> Any:
    """``name`` a link to the file outside the folder (the build sends the link, and cannot follow it)."""

    def edit(folder: Path) -> None:
        outside = folder.parent / "elsewhere" / name
        outside.parent.mkdir()
        (folder / name).rename(outside)
        (folder / name).symlink_to(outside)

    return edit


def _not_let_in(name: str) -> Any:
    def edit(folder: Path) -> None:
        ignore = folder / ".dockerignore"
        ignore.write_text(ignore.read_text().replace(f"!{name}\n", ""))

    return edit


@pytest.mark.parametrize(
    ("edit", "gap"),
    [
        (_without("wait_for_workers.py"), "not in the folder, copy it from this version's training/ folder"),
        (_without("wait_for_workers.py", file=False), "not copied to /app by Dockerfile, add it to the COPY line"),
        # the build would fail: COPY names a file the whitelist keeps out of the context
        (
            _not_let_in("wait_for_workers.py"),
            "left out of the build by .dockerignore, let it in (`!wait_for_workers.py` in .dockerignore",
        ),
        (_linked_out("wait_for_workers.py"), "a link to a file the build does not have, copy the file itself in"),
    ],
    ids=["an-earlier-copy", "copied-but-not-into-the-image", "not-let-in-by-dockerignore", "a-link-out"],
)
def test_a_copy_without_a_helpers_script_is_refused_naming_it_and_what_runs_it(
    tmp_path: Path, edit: Any, gap: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        _load(_project(tmp_path, edit))
    (problem,) = [p for p in exc.value.problems if "images.training.context" in p]
    assert f"wait_for_workers.py (an MPI launcher's wait for its workers): {gap}" in problem


def test_a_script_the_stack_does_not_run_is_not_asked_for(tmp_path: Path) -> None:
    """No job of the preset has code: its copy may lack the code download's script."""
    assert _load(_project(tmp_path, _without("fetch_code.py"))).images["training"].context == OWN


def test_a_dockerfile_that_copies_its_whole_folder_into_app_is_taken(tmp_path: Path) -> None:
    def copy_all(folder: Path) -> None:
        dockerfile = folder / "Dockerfile"
        dockerfile.write_text(re.sub(r"(?m)^COPY checkpointer\.py .* /app/$", "COPY . /app/", dockerfile.read_text()))
        assert "COPY . /app/" in dockerfile.read_text()

    assert _load(_project(tmp_path, copy_all)).images["training"].context == OWN


def _rewrite_copy(line: str) -> Any:
    """Replace training/'s ``COPY <scripts> /app/`` with ``line`` (``{scripts}``: the scripts, space-separated;
    ``{json}``: as a JSON list)."""

    def edit(folder: Path) -> None:
        dockerfile = folder / "Dockerfile"
        text = dockerfile.read_text()
        match = re.search(r"(?m)^COPY ((?:\S+\.py ?)+) /app/$", text)
        assert match
        scripts = match.group(1).split()
        new = line.format(scripts=" ".join(scripts), json=", ".join(f'"{s}"' for s in scripts))
        dockerfile.write_text(text[: match.start()] + new + text[match.end() :])

    return edit


@pytest.mark.parametrize(
    "line",
    [
        'COPY [{json}, "/app/"]',
        "ADD {scripts} /app/",
        "COPY --chown=1000:1000 {scripts} ./",
        "ARG APP=/app\nCOPY {scripts} ${{APP}}/",
        "COPY *.py /app/",
        'COPY --chown=1000:1000 [{json}, "/app/"]',
        "COPY {scripts} /app",
    ],
    ids=["json-form", "add", "relative-to-workdir", "build-arg", "pattern", "json-with-options", "into-workdir"],
)
def test_every_form_of_copy_into_app_is_taken(tmp_path: Path, line: str) -> None:
    assert _load(_project(tmp_path, _rewrite_copy(line))).images["training"].context == OWN


@pytest.mark.parametrize(
    "line",
    ["COPY {scripts} /opt/", "COPY --from=builder {scripts} /app/"],
    ids=["another-folder", "from-another-stage"],
)
def test_a_copy_elsewhere_or_from_another_stage_is_refused(tmp_path: Path, line: str) -> None:
    with pytest.raises(
        ConfigError,
        match=r"wait_for_workers\.py \(an MPI launcher's wait for its workers\).*: not copied to /app by Dockerfile",
    ):
        _load(_project(tmp_path, _rewrite_copy(line)))


def _load_dev(project: Path, image: str = "training") -> Any:
    """The dev preset (pytorch jobs, a dataset) with its jobs on ``image``, built from the project's ``my-training``."""
    cfg = stack_config("dev")
    cfg[P + "images"] = {image: {"context": OWN}}
    cfg[P + "jobs"] = {name: {**job, "image": image} for name, job in cfg[P + "jobs"].items()}
    return load_config(PROJECT, "dev", cfg, project_dir=project)


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("run_script.py", "torchrun's wrapper of a pytorch job's script"),
        ("launch.py", "a pytorch job's launcher"),
        ("process_end.py", "imported by allreduce_bench.py, launch.py, run_script.py, train.py"),
        ("cifar_io.py", "imported by evaluate.py, stage_data.py, train.py"),
    ],
)
def test_a_pytorch_jobs_scripts_and_their_imports_are_asked_for(tmp_path: Path, script: str, why: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{script} ({why}): not in the folder")):
        _load_dev(_project(tmp_path, _without(script)))


def test_an_own_image_of_another_name_needs_the_torchrun_wrapper_not_the_launcher(tmp_path: Path) -> None:
    """Only the ``training`` image's pytorch jobs start through the launcher; every pytorch job's torchrun runs
    run_script.py."""
    assert _load_dev(_project(tmp_path, _without("launch.py")), "mine").images["mine"].context == OWN
    with pytest.raises(ConfigError, match=r"images\.mine\.context: .*run_script\.py \(torchrun's wrapper"):
        _load_dev(_project(tmp_path / "without-wrapper", _without("run_script.py")), "mine")


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("train.py", "eks-training:jobs.train.script"),
        ("evaluate.py", "eks-training:jobs.evaluate.command"),
        ("checkpointer.py", "imported by train.py"),
    ],
)
def test_a_jobs_own_program_from_training_is_asked_for(tmp_path: Path, script: str, why: str) -> None:
    """dev's jobs run /app/train.py and /app/evaluate.py, training/'s own: a copy without them (or what they import)
    is refused."""
    with pytest.raises(ConfigError, match=re.escape(f"{script} ({why}): not in the folder")):
        _load_dev(_project(tmp_path, _without(script)))


@pytest.mark.parametrize("imported", [True, False], ids=["imported-from-s3", "staged"])
def test_a_dataset_fsx_imports_needs_no_staging_script(tmp_path: Path, imported: bool) -> None:
    """FSx imports an S3 prefix under its linked path: no staging Job runs stage_data.py, so a copy may lack it. A
    dataset downloaded from a URL is staged, and the copy must hold it (the control)."""
    cfg = stack_config("p5")
    source = "s3://team-data/datasets/cifar10/" if imported else "https://example.com/cifar10.tar.gz"
    cfg[P + "datasets"] = {"cifar10": {"source": source}}
    cfg[P + "storage"]["fsx"]["dataRepository"] = {"s3Path": "s3://team-data/datasets/", "fileSystemPath": "/in"}
    cfg[P + "images"] = {**(cfg.get(P + "images") or {}), "training": {"context": OWN}}
    project = _project(tmp_path, _without("stage_data.py"))
    if imported:
        assert load_config(PROJECT, "p5", cfg, project_dir=project).images["training"].context == OWN
    else:
        with pytest.raises(ConfigError, match=r"stage_data\.py \(a dataset's staging\)"):
            load_config(PROJECT, "p5", cfg, project_dir=project)
