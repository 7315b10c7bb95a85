"""Rules on jobs against node groups, images, datasets, their code folder and each other."""

import difflib
import posixpath
from pathlib import Path
from typing import Sequence

from components.code_folder import DEFAULT_CODE_IGNORES, collect_code
from components.conventions import APP_DIR, check_job_name
from components.scheduling import SYSTEM_ROLE
from stacks.config.errors import key
from stacks.config.jobs import (
    TOOLBOX_IMAGE,
    JobConfig,
)
from stacks.config.rules.health import check_health
from stacks.config.rules.images import check_image_gpus, shipped_image_files
from stacks.config.rules.kind_images import check_image_package, check_mpi_image
from stacks.config.rules.sections import (
    Sections,
    image_dockerfile,
    job_path,
    named,
    reference_cycle,
)
from stacks.config.rules.variables import check_variables
from stacks.config.torch_builds import torch_build_problems
from stacks.kinds import KINDS


def check_jobs(s: Sections, problems: list[str]) -> None:
    """Jobs against node groups, images, datasets and each other (the jobs already carry the defaults that depend on
    their group: :func:`~stacks.config.jobs.with_group_defaults`)."""
    if "jobs" in s.set_keys and not s.job_names and "jobs" not in s.failed:
        problems.append(f"{key('jobs')}: define at least one job, or remove the key")
    for name, job in s.jobs.items():
        path = job_path(s, name)
        if job.node_group is None and "nodeGroups" in s.failed:  # not a mapping: reported there, the groups unknown
            continue
        _check_group(s, path, job, problems)
        _check_image(s, path, name, job, problems)
        check_code(s, path, job, problems)
        if job.dataset is not None and job.dataset not in s.datasets and not named(s, "datasets", job.dataset):
            problems.append(
                f"{key(f'{path}.dataset')}: {job.dataset!r} is not a dataset; use one of "
                f"{', '.join(sorted(s.datasets)) or '(none: define datasets first)'}"
            )
        check_after(s, path, name, job.after, problems)
        check_variables(s, path, name, job, problems)
    _check_check_names(s, problems)
    cycle = reference_cycle({n: [a for a in j.after if a != n] for n, j in s.jobs.items()})
    if cycle:
        problems.append(
            f"{key(f'{job_path(s, cycle[0])}.after')}: the jobs wait for each other in a cycle ({' -> '.join(cycle)}); "
            "remove one of these after entries"
        )


def _check_check_names(s: Sections, problems: list[str]) -> None:
    """No job takes the Kubernetes name of another job's health check (:func:`check_job_name`): the two Jobs, their
    Services and network policies would clash when the program registers them."""
    checks = {check_job_name(n): n for n, j in s.jobs.items() if j.health_check is not None and j.health_check.enabled}
    for name in s.job_names:
        if name in checks:
            problems.append(
                f"{key(job_path(s, name))}: the name of {checks[name]}'s health check Job "
                f"({key(job_path(s, checks[name]) + '.healthCheck')}); rename this job"
            )


def _check_group(s: Sections, path: str, job: JobConfig, problems: list[str]) -> None:
    """The job's node group: named when it must be, the system group only for light kinds, room for its nodes, no
    more processes than the node type's GPUs or vCPUs, and its health check on the group's types."""
    group_name = job.node_group
    if group_name is None:
        problems.append(
            f"{key(f'{path}.nodeGroup')}: required when there is not exactly one worker group; name one of "
            f"{', '.join(sorted(s.group_names)) or '(none: define nodeGroups first)'}"
            + (f" (or system, for a {job.kind} job)" if KINDS[job.kind].on_system_group else "")
        )
    elif group_name == SYSTEM_ROLE:
        if SYSTEM_ROLE in s.groups:  # a worker group named system is refused as such: that problem is the one to fix
            return
        if not KINDS[job.kind].on_system_group:
            light = " or ".join(k.name for k in KINDS.values() if k.on_system_group)
            problems.append(
                f"{key(f'{path}.nodeGroup')}: the system group runs add-ons and light {light} jobs only; "
                f"run {job.kind} jobs on a worker group"
            )
        elif job.nodes > s.system.max_size and "systemNodeGroup" not in s.failed:
            default = "" if "max_size" in s.system.model_fields_set else ", the default"
            problems.append(
                f"{key(f'{path}.nodes')}: {job.nodes} > {key('systemNodeGroup.maxSize')} "
                f"({s.system.max_size}{default}): one pod runs per node; raise maxSize or lower nodes"
            )
        else:
            facts = s.catalog.get(s.system.instance_type)
            check_health(s, path, job, [facts] if facts is not None else [], problems, system=True)
    elif group_name not in s.group_names:
        if "nodeGroups" not in s.failed:
            problems.append(
                f"{key(f'{path}.nodeGroup')}: {group_name!r} is not a worker group; use one of "
                f"{', '.join(sorted(s.group_names)) or '(none: define nodeGroups first)'}"
            )
    elif (g := s.groups.get(group_name)) is not None:
        top = job.node_range[1]
        if job.nodes > g.max_size:
            problems.append(
                f"{key(f'{path}.nodes')}: {job.nodes} > {key(f'nodeGroups.{group_name}.maxSize')} ({g.max_size}): "
                "one pod runs per node; raise maxSize or lower nodes"
            )
        elif top > g.max_size:
            problems.append(
                f"{key(f'{path}.maxNodes')}: {top} > {key(f'nodeGroups.{group_name}.maxSize')} ({g.max_size}); "
                "lower maxNodes or raise maxSize"
            )
        facts = s.catalog.get(g.instance_types[0])
        if facts is not None and job.processes_per_node is not None:
            limit, what = (facts.gpus, "GPUs") if facts.is_gpu else (facts.vcpus, "vCPUs")
            if job.processes_per_node > limit:
                problems.append(
                    f"{key(f'{path}.processesPerNode')}: {job.processes_per_node} > the {limit} {what} of "
                    f"{facts.name}; run at most one process per {what[:-1]}"
                )
        types = [f for t in g.instance_types if (f := s.catalog.get(t)) is not None]
        check_health(s, path, job, types, problems, efa=g.uses_efa(s.catalog), group=group_name)


def _check_image(s: Sections, path: str, name: str, job: JobConfig, problems: list[str]) -> None:
    """The job's image: defined, with a torch build for its group's GPUs (and the bundled image's, for its health
    check), Open MPI where its kind needs it, and the package its kind runs."""
    if job.image not in s.images and not named(s, "images", job.image):
        problems.append(
            f"{key(f'{path}.image')}: {job.image!r} is not an image; use one of {', '.join(sorted(s.images))} "
            f"(or define it under {key('images')})"
        )
        return
    if job.image not in s.images:
        return
    image = s.images[job.image]
    group_name = job.node_group
    if group_name is not None and (g := s.groups.get(group_name)) is not None:
        check_image_gpus(s, path, name, job.image, image, group_name, g, problems)
        # the image's torch build, and the bundled image's for the health check, on the group's GPUs
        checked = {job.image: f"{path}.image"}
        if job.health_check is not None and job.health_check.enabled and TOOLBOX_IMAGE in s.images:
            checked.setdefault(TOOLBOX_IMAGE, f"{path}.healthCheck")
        for image_name, at in checked.items():
            dockerfile = image_dockerfile(s, image_name, s.images[image_name])
            problems.extend(torch_build_problems(s.catalog, at, name, image_name, dockerfile, group_name, g))
    if KINDS[job.kind].needs_mpi_prefix:
        check_mpi_image(s, path, name, job.image, image, problems)
    check_image_package(s, path, name, job.image, image, KINDS[job.kind], problems)


def _near_folder(folder: Path, written: str) -> str:
    """``did you mean ./src? `` when ``folder``'s parent holds a folder of a close name, else nothing; ``written``:
    the folder as the stack file gives it."""
    parent = folder.parent
    if not parent.is_dir():
        return ""
    names = [p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")]
    near = difflib.get_close_matches(folder.name, names, n=1, cutoff=0.6)
    return f"did you mean {posixpath.join(posixpath.dirname(written.rstrip('/')), near[0])}? " if near else ""


def check_code(s: Sections, path: str, job: JobConfig, problems: list[str]) -> None:
    """A job's ``code`` folder (uploaded by the program) exists in the project and holds a file to upload; without
    one, a relative script is a file the image puts in its working folder (:func:`_check_image_script`)."""
    if job.code_folder is None:
        _check_image_script(s, path, job, problems)
        return
    folder = s.project_dir / job.code_folder
    fix = (
        f"give a folder of your Pulumi project (relative to {s.project_dir}) that holds the job's program, or an "
        "s3://bucket/prefix/ you uploaded it to"
    )
    if folder.is_file():
        problems.append(
            f"{key(f'{path}.code')}: {job.code_folder} is a file; give a folder of your project, the one that holds "
            f"it ({posixpath.dirname(job.code_folder) or '.'}), and the file as the job's script or command"
        )
    elif not folder.is_dir():
        problems.append(
            f"{key(f'{path}.code')}: the folder {job.code_folder} does not exist in the project folder "
            f"{s.project_dir}; {_near_folder(folder, job.code_folder)}{fix}"
        )
    elif not (entries := collect_code(str(folder))):
        problems.append(
            f"{key(f'{path}.code')}: the folder {job.code_folder} holds no file to upload (left out: "
            f"{', '.join(DEFAULT_CODE_IGNORES)} and its .dockerignore's patterns); {fix}"
        )
    elif job.script and not job.script.startswith("/"):
        # the job runs in /workspace, the folder's upload: a relative script is one of its files, or torchrun fails
        # on the cluster after the stack is paid for
        script = posixpath.normpath(job.script)
        files = sorted(e.path for e in entries)
        if script not in files:
            near = difflib.get_close_matches(script, files, n=1, cutoff=0.6) or [
                f for f in files if posixpath.basename(f) == posixpath.basename(script)
            ]
            hint = f"did you mean {near[0]}? " if near else ""
            shown = ", ".join(files[:8]) + (f", ... ({len(files)} files)" if len(files) > 8 else "")
            problems.append(
                f"{key(f'{path}.script')}: {job.script!r} is not a file of the job's code folder {job.code_folder} "
                f"(uploaded: {shown}); {hint}give its path relative to that folder, or an absolute path in the image"
            )


def _check_image_script(s: Sections, path: str, job: JobConfig, problems: list[str]) -> None:
    """Without a code folder a relative script runs from the image's working folder: on the image built from this
    project's training/ (WORKDIR /app), it is one of the files its Dockerfile copies there, or torchrun fails on the
    cluster after the stack is paid for (a user's own script written without ``code``). Another image's working
    folder and files are its own Dockerfile's, which this check does not read."""
    if not job.script or job.script.startswith("/") or job.code is not None:  # code in S3: the script is there
        return
    files = shipped_image_files(s, job.image)
    app = sorted(f for f in files or () if f.startswith(APP_DIR + "/"))
    if not app or posixpath.join(APP_DIR, posixpath.normpath(job.script)) in app:
        return
    names = [posixpath.relpath(f, APP_DIR) for f in app]
    near = difflib.get_close_matches(posixpath.normpath(job.script), names, n=1, cutoff=0.8)
    hint = f"did you mean {near[0]}? or " if near else ""
    problems.append(
        f"{key(f'{path}.script')}: {job.script!r} is not a file of the image {job.image} (its {len(names)} files in "
        f"{APP_DIR}), and the job has no code folder; {hint}set {key(f'{path}.code')} to the folder of your "
        "program (uploaded for the job, the script relative to it), or give an absolute path in the image"
    )


def check_after(s: Sections, path: str, name: str, after: Sequence[str], problems: list[str]) -> None:
    """A job's ``after``: other jobs of the stack, each once."""
    for i, other in enumerate(after):
        if other == name:
            problems.append(f"{key(f'{path}.after[{i}]')}: a job cannot wait for itself")
        elif other in after[:i]:
            problems.append(f"{key(f'{path}.after[{i}]')}: {other!r} is given twice; remove this one")
        elif other not in s.job_names:
            others = sorted(n for n in s.job_names if n != name)
            problems.append(
                f"{key(f'{path}.after[{i}]')}: {other!r} is not a job; "
                + (
                    f"use one of {', '.join(others)}"
                    if others
                    else f"this stack has no other job: remove it, or define the job {other} under {key('jobs')}"
                )
            )
