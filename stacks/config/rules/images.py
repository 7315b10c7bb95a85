"""Rules on images: the build folder exists, the image runs on its job's GPUs, an image built from one's own copy of
training/ still holds the project's scripts its pods run. What a job's kind needs in its image: :mod:`.kind_images`."""

import functools
import posixpath
import re
from pathlib import Path
from typing import Optional

from components.catalog import (
    InstanceType,
)
from components.catalog.charts import base_image
from components.catalog.gpus import GpuSupport, compute_capability, runs_on
from components.catalog.sources import SOURCES
from components.image.context import collect_build_context
from components.image.dockerfile import Dockerfile
from components.workloads.toolbox import (
    BENCHMARK_SCRIPT,
    COLLECT_SCRIPT,
    FETCH_SCRIPT,
    STAGE_SCRIPT,
    WAIT_SCRIPT,
)
from stacks.bundle import SHIPPED, TOOLBOX_IMAGE, shipped
from stacks.config.derive import imported
from stacks.config.errors import key
from stacks.config.images import ImageConfig
from stacks.config.nodegroups import NodeGroupConfig
from stacks.config.rules.sections import Sections, image_dockerfile
from stacks.kinds import KINDS


def check_images(s: Sections, problems: list[str]) -> None:
    """Each built image's folder exists (in the project, or shipped) and holds its Dockerfile."""
    for name, image in s.images.items():
        if image.context is None:
            continue
        folder = s.image_folders.get(name, s.project_dir / image.context)
        if not (folder / image.dockerfile).is_file():
            problems.append(
                f"{key(f'images.{name}.context')}: {image.context}/{image.dockerfile} does not exist in the project "
                f"folder {s.project_dir}; give a folder of your Pulumi project that holds the Dockerfile (or one this "
                f"package ships: {', '.join(SHIPPED)})"
            )


def toolbox_scripts(s: Sections) -> dict[str, str]:
    """The toolbox's scripts this stack's helpers run (path in the image -> what runs it)."""
    jobs = s.jobs.values()
    out = {script: why for job in jobs for script, why in KINDS[job.kind].toolbox_scripts.items()}
    needs = {
        STAGE_SCRIPT: ("a dataset's staging", any(not imported(s.storage, d) for d in s.datasets.values())),
        BENCHMARK_SCRIPT: ("a health check", any(j.health_check is not None and j.health_check.enabled for j in jobs)),
        WAIT_SCRIPT: ("a job's wait for its `after`", any(j.after for j in jobs)),
        FETCH_SCRIPT: ("a job's code download", any(j.code for j in jobs)),
        COLLECT_SCRIPT: ("the benchmark's collector", any(p.startswith("benchmark") for p in s.job_paths.values())),
    }
    out.update({path: why for path, (why, needed) in needs.items() if needed})
    return out


#: An import statement's first module (``import a``, ``import a, b`` names a only; training/'s scripts import one
#: module a line).
_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+([A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


@functools.cache
def training_imports(script: str) -> tuple[str, ...]:
    """The modules of the shipped training/ folder that its ``script`` imports, directly or through them."""
    folder = shipped(TOOLBOX_IMAGE)
    seen: set[str] = set()
    todo = [script]
    while todo:
        path = folder / todo.pop()
        if not path.is_file():
            continue
        names = {m.group(1) for m in _IMPORT.finditer(path.read_text())}
        for module in (f"{name}.py" for name in names):
            if module not in seen and module != script and (folder / module).is_file():
                seen.add(module)
                todo.append(module)
    return tuple(sorted(seen))


def image_scripts(s: Sections, name: str) -> dict[str, str]:
    """The project's scripts the built image ``name`` must hold (path in the image -> what runs it): the helpers'
    when it is the toolbox, its jobs' own (a pytorch job's launcher and torchrun wrapper), and the modules of
    training/ they import."""
    out = toolbox_scripts(s) if name == TOOLBOX_IMAGE else {}
    for job_name, job in s.jobs.items():
        if job.image != name:
            continue
        out.update(KINDS[job.kind].image_scripts(name == TOOLBOX_IMAGE))
        # the job's own program when it is one of training/'s (the presets' /app/train.py)
        for field, words in (
            ("script", [job.script]),
            ("command", job.command),
            ("launcherCommand", job.launcher_command),
        ):
            program = next((w for w in words or [] if w and w.startswith("/app/") and w.endswith(".py")), None)
            if program and (shipped(TOOLBOX_IMAGE) / program.removeprefix("/app/")).is_file():
                out.setdefault(program, key(f"jobs.{job_name}.{field}"))
    importers: dict[str, list[str]] = {}
    for path in sorted(out):
        for module in training_imports(posixpath.basename(path)):
            importers.setdefault(posixpath.join(posixpath.dirname(path), module), []).append(posixpath.basename(path))
    return {**{m: f"imported by {', '.join(by)}" for m, by in importers.items()}, **out}


#: What to do about each way a script can be missing from an image.
_FIXES = {
    "not in the folder": "copy it from this version's training/ folder",
    "left out of the build by .dockerignore": "let it in ({lines} in .dockerignore, as training/'s does)",
    "a link to a file the build does not have": "copy the file itself in",
}


def _gap_line(gap: str, scripts: list[tuple[str, str]]) -> str:
    """One gap of :func:`_script_gaps`: the scripts it leaves out (each with what runs it), then its fix."""
    fix = _FIXES.get(gap, "add it to the COPY line into /app").format(lines=", ".join(f"`!{n}`" for n, _ in scripts))
    return f"{', '.join(f'{n} ({why})' for n, why in scripts)}: {gap}, {fix}"


def shipped_image_files(s: Sections, name: str) -> Optional[set[str]]:
    """Where the files of image ``name`` land in it (its Dockerfile's COPY and ADD of the context), when it is built
    from this project's shipped folder of that name (training/: its files, its Dockerfile's WORKDIR /app and COPY
    lines are this project's); ``None`` for any other image, whose WORKDIR, other stages, archives and RUN steps this
    reading does not follow."""
    image = s.images.get(name)
    dockerfile = image_dockerfile(s, name, image) if image is not None else None
    if image is None or dockerfile is None or image.context is None or name not in SHIPPED:
        return None
    folder = s.image_folders.get(name, s.project_dir / image.context)
    if folder.resolve() != shipped(name).resolve():
        return None
    context = [entry.path for entry in collect_build_context(str(folder), image.dockerfile)]
    return {p for c in dockerfile.copies() for path in context if (p := c.place(path)) is not None}


def check_image_scripts(s: Sections, problems: list[str]) -> None:
    """An image built from a folder of one's own (a copy of training/, to add packages) must still hold the
    project's scripts its pods run: the helpers' in the toolbox, a pytorch job's launcher and torchrun wrapper. A
    copy made from an earlier version of this project may lack a script added since."""
    for name, image in s.images.items():
        folder = s.image_folders.get(name, s.project_dir / image.context) if image.context else None
        dockerfile = image_dockerfile(s, name, image)
        if folder is None or dockerfile is None or (name in SHIPPED and folder.resolve() == shipped(name).resolve()):
            continue
        scripts = image_scripts(s, name)
        gaps = _script_gaps(folder, image.dockerfile, dockerfile, scripts) if scripts else {}
        if gaps:
            problems.append(
                f"{key(f'images.{name}.context')}: its pods run this project's scripts from /app, and "
                f"{image.context}/ does not put every one there: "
                + "; ".join(_gap_line(gap, names) for gap, names in gaps.items())
                + " (a copy of an earlier version of training/ lacks the scripts added since; the files of the base "
                "image are not read: copy them in, or give the image as prebuilt)"
            )


def _script_gaps(
    folder: Path, dockerfile_name: str, dockerfile: Dockerfile, scripts: dict[str, str]
) -> dict[str, list[tuple[str, str]]]:
    """The ``scripts`` (path in the image -> what runs it) the image built from ``folder`` would lack (each name with
    what runs it), by why."""
    context = {entry.path: entry for entry in collect_build_context(str(folder), dockerfile_name)}
    placed = {c.place(path): path for c in dockerfile.copies() for path in context}
    gaps: dict[str, list[tuple[str, str]]] = {}
    for path, why in scripts.items():
        name, source = posixpath.basename(path), placed.get(path)
        if source is not None:
            target = (folder / source).resolve()
            root = folder.resolve()
            if not context[source].is_symlink or (
                target.is_relative_to(root) and target.relative_to(root).as_posix() in context
            ):
                continue
            gap = "a link to a file the build does not have"
        elif any(posixpath.basename(p) == name for p in context):
            gap = f"not copied to {posixpath.dirname(path)} by {dockerfile_name}"
        elif (folder / name).is_file():
            gap = "left out of the build by .dockerignore"
        else:
            gap = "not in the folder"
        gaps.setdefault(gap, []).append((name, why))
    return gaps


def _supported_alternative(s: Sections, facts: InstanceType, support: GpuSupport) -> str:
    """The cheapest catalogued instance type with as many GPUs as ``facts`` whose GPU ``support`` covers (what to
    run on instead), or an empty string when the catalog has none with a price."""
    fits = [
        t
        for t in s.catalog.instance_types.values()
        if t.gpus == facts.gpus
        and t.price_per_hour is not None
        and (cc := compute_capability(t.gpu_model)) is not None
        and support.supports(cc)
    ]
    if not fits:
        return ""
    best = min(fits, key=lambda t: (t.price_per_hour or 0.0, t.name))
    cc = compute_capability(best.gpu_model)
    assert cc is not None
    return (
        f", such as {best.name} ({best.gpus} x {best.gpu_model}, compute capability {cc[0]}.{cc[1]}, "
        f"${best.price_per_hour}/h On-Demand in us-east-1)"
    )


def check_image_gpus(
    s: Sections,
    path: str,
    job_name: str,
    image_name: str,
    image: ImageConfig,
    group_name: str,
    g: NodeGroupConfig,
    problems: list[str],
) -> None:
    """An image runs on the GPU of every instance type of the group its job runs on (the GPU's compute
    capability from the catalog): its final base (a prebuilt image is its own), when the catalog knows which GPUs the
    GPU code that base ships supports (``BaseImage.gpus``, as its publisher states it), supports that GPU; and every
    CUDA compilation of the image has a kernel for it (the CUDA compatibility rules of :mod:`components.catalog.gpus`).
    Otherwise the job fails on the node: "no kernel image is available for execution on the device", or the framework
    refusing or ignoring the GPU."""
    dockerfile = image_dockerfile(s, image_name, image)
    if dockerfile is not None:
        compilations = [targets for _, targets in dockerfile.cuda_compilations() if targets]
        ref = dockerfile.final_base()
        where = f"{image.context}/{image.dockerfile}"
        built_on = f"built on {ref} ({where})"
        instead = "build the image on a base"
    elif image.prebuilt is not None:  # a prebuilt image is its own base: the publisher's statement applies to it
        compilations, ref = [], image.prebuilt
        where = built_on = f"the prebuilt {ref}"
        instead = "use an image"
    else:
        return
    base = base_image(ref) if ref else None
    support = base.gpus if base is not None else None
    if not compilations and support is None:
        return
    for t in g.instance_types:
        facts = s.catalog.get(t)
        if facts is None or not facts.is_gpu:
            continue
        cc = compute_capability(facts.gpu_model)
        if cc is None:
            what = f"compiles CUDA code ({where})" if compilations else f"is {built_on}"
            problems.append(
                f"{key(f'{path}.image')}: job {job_name} runs image {image_name!r}, which {what}, on {t} in node group "
                f"{group_name}, whose GPU {facts.gpu_model!r} has no compute capability in the catalog "
                "(components/catalog/gpus.py), so whether the image runs on it is unknown; run the job on a group of "
                "catalogued GPUs"
            )
            continue
        if support is not None and not support.supports(cc):
            problems.append(
                f"{key(f'{path}.image')}: job {job_name} runs image {image_name!r}, {built_on}, whose "
                f"publisher supports GPUs of {support} ({SOURCES[support.source].url}), not the {facts.gpu_model} GPU "
                f"(compute capability {cc[0]}.{cc[1]}) of {t} in node group {group_name}; run the job on a group whose "
                f"GPUs the base supports{_supported_alternative(s, facts, support)}, or {instead} "
                f"that supports the {facts.gpu_model}"
            )
            continue
        for targets in compilations:
            if not runs_on(targets, cc):
                arch = f"{cc[0]}{cc[1]}"
                problems.append(
                    f"{key(f'{path}.image')}: job {job_name} runs image {image_name!r}, whose CUDA code ({where}: "
                    f"{' '.join(sorted(map(str, targets)))}) has no kernel for the {facts.gpu_model} GPU (compute "
                    f"capability {cc[0]}.{cc[1]}) of {t} in node group {group_name}; add "
                    f"-gencode=arch=compute_{arch},code=sm_{arch} to the image's NVCC_GENCODE, or run the job on a "
                    "group whose GPUs the image covers"
                )
                break
