"""Rules across sections: instance types against the catalog, EFA against zones and the VPC, jobs
against node groups, images and datasets, the health check against published figures, the FSx file
system against the zones of the groups whose jobs mount it and the datasets it imports from S3.

Each rule reports only root causes: a section that failed its own validation is not reported again
by rules that depend on it, and defaults the user did not set are not blamed.
"""

import difflib
import ipaddress
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from components.catalog import (
    INSTANCE_TYPES,
    NETWORK_TOPOLOGY,
    REFERENCE_ALLREDUCE,
    Catalog,
    InstanceType,
)
from components.catalog.charts import base_image
from components.catalog.gpus import GpuSupport, compute_capability, runs_on
from components.catalog.sources import SOURCES
from components.image.dockerfile import Dockerfile, read_dockerfile
from components.job_code import DEFAULT_CODE_IGNORES, collect_code
from components.nodeplan import (
    InconsistentFacts,
    allreduce_busbw_ceiling,
    efa_profile,
    network_gbytes_per_s,
    pod_size,
)
from components.scheduling import SYSTEM_ROLE
from stacks.bundle import SHIPPED
from stacks.config.amis import ami_release_problems
from stacks.config.base import NAME_RE, ZONE_ID_RE, entry_name_problem
from stacks.config.cluster import ClusterConfig
from stacks.config.errors import key
from stacks.config.jobs import (
    TOOLBOX_IMAGE,
    DatasetConfig,
    ImageConfig,
    JobConfig,
)
from stacks.config.network import ExistingVpcConfig, NetworkConfig
from stacks.config.nodegroups import NodeGroupConfig, SystemNodeGroupConfig
from stacks.config.storage import FsxConfig, StorageConfig
from stacks.config.torch_builds import torch_build_problems
from stacks.kinds import KINDS

#: The repository (image build contexts are folders of it).
#: Cluster names prefix IAM role names (64 characters at most).
CLUSTER_NAME_MAX = 40


@dataclass
class Sections:
    """The parsed sections a rule looks at, and which paths failed their own validation."""

    set_keys: set[str]
    """Top-level keys the stack sets."""
    cluster_name: str
    network: Optional[NetworkConfig]
    existing_vpc: Optional[ExistingVpcConfig]
    cluster: ClusterConfig
    system: SystemNodeGroupConfig
    groups: dict[str, NodeGroupConfig]
    """Worker groups that passed their own validation."""
    group_names: list[str]
    """Every worker group the stack names (valid or not)."""
    catalog: Catalog
    images: dict[str, ImageConfig]
    """Every image (the default training image included)."""
    datasets: dict[str, DatasetConfig]
    jobs: dict[str, JobConfig]
    """Jobs that passed their own validation."""
    job_names: list[str]
    """Every job the stack names (valid or not), the benchmark's experiments included."""
    job_paths: dict[str, str] = field(default_factory=dict)
    """Config paths of jobs that are not under ``jobs`` (the benchmark's experiments); default ``jobs.<name>``."""
    entry_names: dict[str, list[str]] = field(default_factory=dict)
    """Every entry name of each map section (``nodeGroups``, ``jobs``, ``images``, ``datasets``) as written."""
    storage: StorageConfig = field(default_factory=StorageConfig)
    failed: set[str] = field(default_factory=set)
    """Config paths (``cluster``, ``nodeGroups.gpu``) whose own validation failed."""
    failed_group_types: dict[str, list[str]] = field(default_factory=dict)
    image_folders: dict[str, Path] = field(default_factory=dict)
    """Each built image's folder (:func:`stacks.bundle.context_folder`)."""
    project_dir: Path = field(default_factory=Path.cwd)
    """The Pulumi project's folder (image contexts are its folders)."""
    """Instance types named by groups that failed their own validation (still checked against the catalog)."""


def _known(s: "Sections", name: str, path: str, problems: list[str]) -> Optional[InstanceType]:
    it = s.catalog.get(name)
    # a failed facts entry (or instanceFacts itself) is reported there
    if it is None and f"instanceFacts.{name}" not in s.failed and "instanceFacts" not in s.failed:
        known = sorted(s.catalog.instance_types)
        # EC2's type names are lowercase (m5.xlarge): a capital or a dropped letter is a near miss, named first
        near = [k for k in known if k == name.lower().strip()] or difflib.get_close_matches(
            name, known, n=1, cutoff=0.8
        )
        hint = f"did you mean {near[0]}? " if near else ""
        problems.append(
            f"{key(path)}: unknown instance type {name!r}; {hint}use one of {', '.join(known)}, "
            f"or describe it under {key('instanceFacts')}.{name} (vcpus, memoryMib, gpus, ..., source)"
        )
    return it


def _existing_vpc(s: "Sections") -> bool:
    """The stack deploys into an existing VPC: ``existingVpc`` is set (even when it failed its own validation,
    so rules about subnets do not tell the user to set what they did set)."""
    return s.existing_vpc is not None or "existingVpc" in s.failed


def check_cluster_name(s: Sections, problems: list[str]) -> None:
    """The cluster name prefixes AWS names."""
    if not NAME_RE.match(s.cluster_name) or len(s.cluster_name) > CLUSTER_NAME_MAX:
        problems.append(
            f"{key('clusterName')}: {s.cluster_name!r} must be 1-{CLUSTER_NAME_MAX} lowercase letters, digits and '-' "
            "(it prefixes IAM role names, which are limited to 64 characters)"
        )


def check_network(s: Sections, problems: list[str]) -> None:
    """A new VPC or an existing one, not both; the service range outside the VPC."""
    if "network" in s.set_keys and "existingVpc" in s.set_keys:
        problems.append(
            f"{key('network')} and {key('existingVpc')} are both set; keep {key('existingVpc')} to deploy into "
            f"an existing VPC, or {key('network')} to create one"
        )
    if s.cluster.service_cidr and s.network is not None:
        svc, vpc = ipaddress.IPv4Network(s.cluster.service_cidr), ipaddress.IPv4Network(s.network.vpc_cidr)
        if svc.overlaps(vpc):
            problems.append(
                f"{key('cluster.serviceCidr')}: {svc} overlaps {key('network.vpcCidr')} {vpc}; pick a service range "
                "outside the VPC, e.g. 172.20.0.0/16"
            )


def check_system_group(s: Sections, problems: list[str]) -> None:
    """The system group runs add-ons on a known CPU type."""
    it = _known(s, s.system.instance_type, "systemNodeGroup.instanceType", problems)
    if it is not None and it.is_gpu:
        problems.append(
            f"{key('systemNodeGroup.instanceType')}: {it.name} is a GPU type; the system group runs add-ons only, "
            "use a small CPU type such as m5.large"
        )


def check_group(s: Sections, name: str, g: NodeGroupConfig, problems: list[str]) -> None:
    """One worker group against the catalog, the network and the cluster."""
    path = f"nodeGroups.{name}"
    facts = [_known(s, t, f"{path}.instanceTypes[{i}]", problems) for i, t in enumerate(g.instance_types)]
    present = [f for f in facts if f is not None]
    if len({f.gpus for f in present}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: {', '.join(f'{f.name} ({f.gpus} GPUs)' for f in present)} have different "
            "GPU counts; pods request a whole node's GPUs, so put them in separate groups"
        )
    if g.subnet_id is not None:
        if s.existing_vpc is None and "existingVpc" not in s.failed:  # a failed existingVpc is reported there
            problems.append(f"{key(f'{path}.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
        elif s.existing_vpc is not None and g.subnet_id not in s.existing_vpc.private_subnet_ids:
            problems.append(
                f"{key(f'{path}.subnetId')}: {g.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}"
            )
    if g.availability_zone is not None:
        if _existing_vpc(s):
            problems.append(f"{key(f'{path}.availabilityZone')}: with existingVpc pin the group with subnetId instead")
        elif (
            s.network is not None
            and s.network.availability_zones
            and g.availability_zone not in s.network.availability_zones
        ):
            problems.append(
                f"{key(f'{path}.availabilityZone')}: {g.availability_zone} is not one of "
                f"{key('network.availabilityZones')} {s.network.availability_zones}"
            )
    if not present or len(present) != len(facts):
        return
    check_efa(s, path, g, present, problems)
    check_topology(path, g, present, problems)


def check_efa(s: Sections, path: str, g: NodeGroupConfig, facts: list[InstanceType], problems: list[str]) -> None:
    """EFA on the group's types: supported, one consistent interface count, one zone, a VPC CNI that
    supports efa-only interfaces."""
    if g.efa and not all(f.supports_efa for f in facts):
        without = ", ".join(f.name for f in facts if not f.supports_efa)
        with_efa = ", ".join(sorted(n for n, t in INSTANCE_TYPES.items() if t.supports_efa))
        problems.append(
            f"{key(f'{path}.efa')}: {without} has no EFA; remove efa: true or use a type with EFA ({with_efa})"
        )
        return
    if not g.uses_efa(s.catalog):
        return
    for f in facts:
        try:
            efa_profile(f)
        except InconsistentFacts as exc:
            where = f"instanceFacts.{f.name}" if f.user_supplied else f"{path}.instanceTypes"
            problems.append(f"{key(where)}: {exc}")
            return
    if len({f.max_efa_interfaces for f in facts}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: EFA groups need one interface count; "
            f"{', '.join(f'{f.name} ({f.max_efa_interfaces})' for f in facts)} differ, split them into groups"
        )
    if not g.single_zone:
        fld = "subnetId" if _existing_vpc(s) else "availabilityZone"
        where = "a private subnet of that zone" if fld == "subnetId" else "the zone where its capacity is"
        if g.efa is None:  # on by default for the type: the user may not want EFA at all
            off = (
                "set efa: false (or capacityType: SPOT, whose groups default to efa: false) to spread the group over "
                "the VPC's zones without EFA"
            )
            why = f"efa defaults to true for {facts[0].name}, and "
        else:
            off = "remove efa: true to spread the group over the VPC's zones without EFA" + (
                " (what spot capacity needs: it is found across zones)" if g.capacity_type == "SPOT" else ""
            )
            why = ""
        problems.append(
            f"{key(f'{path}.{fld}')}: {why}EFA groups run in one zone (with a cluster placement group); either set "
            f"{fld} ({where}) to keep EFA, or {off}"
        )


def check_entry_names(s: Sections, problems: list[str]) -> None:
    """Names of node groups, jobs, images and datasets: DNS labels within :data:`ENTRY_NAME_MAX` (jobs start with a
    letter: :data:`~stacks.config.base.JOB_NAME_RE`)."""
    for section, names in s.entry_names.items():
        for name in names:
            why = entry_name_problem(section, name, "it")
            if why is not None:
                problems.append(f"{key(f'{section}.{name}')}: {why}")


def check_zone_forms(s: Sections, problems: list[str]) -> None:
    """Zones are written one way in a stack, all names or all zone IDs: which name is which ID is only known in
    the account, so rules comparing zones offline (a group in the VPC's zones, FSx beside its readers) need one form."""
    refs: list[tuple[str, str]] = []
    if s.network is not None:
        refs += [(f"network.availabilityZones[{i}]", z) for i, z in enumerate(s.network.availability_zones or [])]
    refs += [
        (f"nodeGroups.{n}.availabilityZone", g.availability_zone) for n, g in s.groups.items() if g.availability_zone
    ]
    if s.storage.backend == "fsx" and s.storage.fsx_settings.availability_zone:
        refs.append(("storage.fsx.availabilityZone", s.storage.fsx_settings.availability_zone))
    ids = [(path, z) for path, z in refs if ZONE_ID_RE.match(z)]
    names = [(path, z) for path, z in refs if not ZONE_ID_RE.match(z)]
    if ids and names:
        path, z = names[0]
        id_path, id_z = ids[0]
        problems.append(
            f"{key(path)}: {z} is a zone name while {key(id_path)} is a zone ID ({id_z}); write every zone of the "
            "stack the same way, all names or all IDs"
        )


def check_group_names(s: Sections, problems: list[str]) -> None:
    """Group names: not ``system``; at least one group when the key is set."""
    for name in s.group_names:
        path = f"nodeGroups.{name}"
        if name == "system":
            problems.append(f"{key(path)}: 'system' is reserved for systemNodeGroup; rename the group")
    if "nodeGroups" in s.set_keys and not s.group_names and "nodeGroups" not in s.failed:
        problems.append(f"{key('nodeGroups')}: define at least one worker group, or remove the key")


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


def job_path(s: Sections, name: str) -> str:
    """The config path of a job: ``jobs.<name>``, or ``benchmark.experiments.<name>`` for an experiment."""
    return s.job_paths.get(name, f"jobs.{name}")


def _after_cycle(jobs: dict[str, list[str]]) -> Optional[list[str]]:
    """A cycle of ``after`` references (as a path ``a -> b -> a``), or ``None``."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> Optional[list[str]]:
        state[n] = 1
        path.append(n)
        for m in jobs.get(n, []):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if m in jobs and state.get(m) is None and (found := visit(m)):
                return found
        state[n] = 2
        path.pop()
        return None

    for n in sorted(jobs):
        if state.get(n) is None and (found := visit(n)):
            return found
    return None


def _named(s: Sections, section: str, name: str) -> bool:
    """``name`` is an entry of the map ``section`` as written (perhaps one that failed its own validation, which is
    reported there), or the section itself failed (its entries are unknown)."""
    return section in s.failed or name in s.entry_names.get(section, [])


def check_jobs(s: Sections, problems: list[str]) -> None:
    """Jobs against node groups, images, datasets and each other (the jobs already carry the defaults that depend on
    their group: :func:`~stacks.config.jobs.with_group_defaults`)."""
    if "jobs" in s.set_keys and not s.job_names and "jobs" not in s.failed:
        problems.append(f"{key('jobs')}: define at least one job, or remove the key")
    for name, job in s.jobs.items():
        path = job_path(s, name)
        group_name = job.node_group
        if group_name is None:
            if "nodeGroups" in s.failed:  # not a mapping: reported there, the groups are unknown
                continue
            problems.append(
                f"{key(f'{path}.nodeGroup')}: required when there is not exactly one worker group; name one of "
                f"{', '.join(sorted(s.group_names)) or '(none: define nodeGroups first)'}"
                + (f" (or system, for a {job.kind} job)" if KINDS[job.kind].on_system_group else "")
            )
        elif group_name == SYSTEM_ROLE:
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
            check_health(s, path, job, [f for t in g.instance_types if (f := s.catalog.get(t)) is not None], problems)
        if job.image not in s.images and not _named(s, "images", job.image):
            problems.append(
                f"{key(f'{path}.image')}: {job.image!r} is not an image; use one of {', '.join(sorted(s.images))} "
                f"(or define it under {key('images')})"
            )
        elif job.image in s.images:
            image = s.images[job.image]
            if group_name is not None and (g := s.groups.get(group_name)) is not None:
                check_image_gpus(s, path, name, job.image, image, group_name, g, problems)
                # the image's torch build, and the bundled image's for the health check, on the group's GPUs
                checked = {job.image: f"{path}.image"}
                if job.health_check is not None and job.health_check.enabled and TOOLBOX_IMAGE in s.images:
                    checked.setdefault(TOOLBOX_IMAGE, f"{path}.healthCheck")
                for image_name, at in checked.items():
                    dockerfile = _dockerfile(s, image_name, s.images[image_name])
                    problems.extend(torch_build_problems(s.catalog, at, name, image_name, dockerfile, group_name, g))
            KINDS[job.kind].image_problems(s, path, name, job.image, image, problems)
        check_code(s, path, job, problems)
        if job.dataset is not None and job.dataset not in s.datasets and not _named(s, "datasets", job.dataset):
            problems.append(
                f"{key(f'{path}.dataset')}: {job.dataset!r} is not a dataset; use one of "
                f"{', '.join(sorted(s.datasets)) or '(none: define datasets first)'}"
            )
        for i, other in enumerate(job.after):
            if other == name:
                problems.append(f"{key(f'{path}.after[{i}]')}: a job cannot wait for itself")
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
    cycle = _after_cycle({n: [a for a in j.after if a != n] for n, j in s.jobs.items()})
    if cycle:
        problems.append(
            f"{key(f'{job_path(s, cycle[0])}.after')}: the jobs wait for each other in a cycle ({' -> '.join(cycle)}); "
            "remove one of these after entries"
        )


def check_code(s: Sections, path: str, job: JobConfig, problems: list[str]) -> None:
    """A job's ``code`` folder (uploaded by the program) exists in the project and holds a file to upload."""
    if job.code_folder is None:
        return
    folder = s.project_dir / job.code_folder
    fix = (
        f"give a folder of your Pulumi project (relative to {s.project_dir}, the folder of its Pulumi.yaml) that "
        "holds the job's program, or an s3://bucket/prefix/ you uploaded it to"
    )
    if not folder.is_dir():
        problems.append(
            f"{key(f'{path}.code')}: the folder {job.code_folder} does not exist in the project folder "
            f"{s.project_dir}; {fix}"
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


def _dockerfile(s: Sections, name: str, image: ImageConfig) -> Optional[Dockerfile]:
    """The Dockerfile of a built image (its folder resolved as check_images resolves it), or ``None`` (prebuilt, or
    a folder without it: reported by check_images)."""
    if image.context is None:
        return None
    folder = s.image_folders.get(name, s.project_dir / image.context)
    if not (folder / image.dockerfile).is_file():
        return None
    return read_dockerfile(folder, image.dockerfile)


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
    dockerfile = _dockerfile(s, image_name, image)
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


def check_mpi_image(
    s: Sections, path: str, job_name: str, image_name: str, image: ImageConfig, problems: list[str]
) -> None:
    """An MPI job's image says where its Open MPI is: the launcher runs ``<prefix>/bin/mpirun``, which makes Open MPI
    start ``<prefix>/bin/orted`` on the workers with ``<prefix>/lib`` on their library path (orterun(1)); sshd gives
    the workers' sessions neither the image's PATH nor its LD_LIBRARY_PATH."""
    if image.mpi_prefix is not None:
        return
    dockerfile = _dockerfile(s, image_name, image)
    if dockerfile is not None and dockerfile.mpi_prefix():
        return
    where = (
        f"its Dockerfile ({image.context}/{image.dockerfile}) sets no ENV OPAL_PREFIX"
        if image.context
        else "it is prebuilt"
    )
    problems.append(
        f"{key(f'images.{image_name}.mpiPrefix')}: MPI job {job_name} ({key(path)}) runs image {image_name!r}, and "
        f"{where}; set mpiPrefix to the folder of the image's Open MPI (where bin/mpirun and bin/orted are, e.g. "
        "/opt/amazon/openmpi), so the workers' orted is found over ssh"
    )


def check_health(s: Sections, path: str, job: JobConfig, types: list[InstanceType], problems: list[str]) -> None:
    """The health check's values against the nodes it runs on: an enforced check needs a threshold (configured, or a
    published figure for the type); a threshold (GB/s) above what the nodes' network can carry, or a message
    (bytes) larger than a GPU's (or, on CPU nodes, a process's share of the pod's) memory, can never pass: they name
    the unit the value is in and the conversion the user probably meant."""
    h = job.health_check
    if h is None or not h.enabled or not types:
        return
    hkey = f"{path}.healthCheck"
    slowest = min(types, key=lambda t: t.network_gbps)
    procs = job.processes_per_node or max(1, slowest.gpus)
    threshold = h.min_bus_bandwidth_gbytes_per_s
    if threshold is not None:
        ceiling = allreduce_busbw_ceiling(slowest, job.nodes, procs)
        if threshold > ceiling:
            problems.append(
                f"{key(f'{hkey}.minBusBandwidthGBps')}: {_bandwidth_problem(threshold, ceiling, slowest, job.nodes)}"
            )
    elif h.enforce and slowest.name not in REFERENCE_ALLREDUCE:
        problems.append(
            f"{key(f'{hkey}.enforce')}: there is no published all-reduce bandwidth for {slowest.name} to "
            f"derive a threshold from; set {key(f'{hkey}.minBusBandwidthGBps')} (GB/s)"
        )
    if h.max_bytes is not None:
        smallest = min(types, key=lambda t: (t.gpu_memory_mib or 0) if t.is_gpu else t.memory_mib)
        if smallest.is_gpu and smallest.gpu_memory_mib is not None:
            room, where = (
                smallest.gpu_memory_mib * MIB,
                f"the {smallest.gpu_memory_mib} MiB of one {smallest.gpu_model} GPU of {smallest.name}",
            )
        elif not smallest.is_gpu:
            pod = pod_size(smallest)
            room = pod.memory_mib * MIB // procs
            where = f"a process's share of the {pod.memory_mib} MiB a pod on {smallest.name} requests" + (
                f" ({procs} processes)" if procs > 1 else ""
            )
        else:
            return
        if h.max_bytes >= room:
            problems.append(
                f"{key(f'{hkey}.maxBytes')}: {h.max_bytes} bytes ({h.max_bytes / GIB:g} GiB) does not fit in {where}: "
                "every process all-reduces one buffer of maxBytes; the value is in bytes, use a power of two below "
                f"{room} (e.g. {_power_of_two_below(room)})"
            )


#: Bytes in a MiB and a GiB.
MIB = 1 << 20
GIB = 1 << 30


def _power_of_two_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def _bandwidth_problem(value: float, ceiling: float, facts: InstanceType, nodes: int) -> str:
    """Why a bus-bandwidth threshold (GB/s) cannot be reached, and the unit the user probably wrote instead."""
    if nodes >= 2:
        why = (
            f"{value:g} GB/s is above the {ceiling:.4g} GB/s an all-reduce across {nodes} x {facts.name} can reach (a "
            f"node's network is {facts.network_gbps:g} Gbit/s = {network_gbytes_per_s(facts):g} GB/s, and across N "
            "nodes the bus bandwidth is at most N/(N-1) x 2(n-1)/n times that over n ranks)"
        )
    else:
        why = (
            f"{value:g} GB/s is above the {ceiling:.4g} GB/s an all-reduce inside one node can reach (the fastest GPU "
            "link, NVLink 5)"
        )
    guesses = [
        (f"{value:g} bytes/s", "bytes/s", value / 1e9),
        (f"{value:g} Gbit/s", "Gbit/s", value / 8),
        (f"{value:g} MB/s", "MB/s", value / 1e3),
    ]
    for written, unit, gbytes in guesses:
        if 0.1 <= gbytes <= ceiling:
            return (
                f"{why}; did you write {unit}? the value is in GB/s (1e9 bytes/s, as nccl-tests reports busbw): "
                f"{written} is {gbytes:g}"
            )
    return f"{why}; the value is in GB/s (1e9 bytes/s, as nccl-tests reports busbw)"


@dataclass(frozen=True)
class FsxLocation:
    """Where the FSx file system lives: one zone (a new VPC) or one subnet (an existing VPC)."""

    zone: Optional[str]
    """The zone (new VPC), else ``None``."""
    subnet_id: Optional[str]
    """The private subnet (existing VPC), else ``None``."""
    key: str
    """The config key the location comes from (``storage.fsx.availabilityZone`` or a group's zone key)."""
    client_groups: tuple[str, ...]
    """Worker groups pinned to the same place (the groups of the jobs first)."""
    efa_client_groups: tuple[str, ...]
    """Those of them that use EFA (clients of an EFA-enabled file system)."""


def claim_readers(jobs: Mapping[str, JobConfig]) -> dict[str, list[str]]:
    """Worker groups whose jobs mount the shared claim (every job does), each with its jobs, in config order.
    The system group is left out: it spans the VPC's zones and only runs light jobs."""
    out: dict[str, list[str]] = {}
    for name, job in jobs.items():
        if job.node_group is not None and job.node_group != SYSTEM_ROLE:
            out.setdefault(job.node_group, []).append(name)
    return out


def fsx_location(
    fsx: FsxConfig,
    groups: Mapping[str, NodeGroupConfig],
    readers: Mapping[str, Sequence[str]],
    existing_vpc: bool,
    catalog: Catalog,
) -> tuple[Optional[FsxLocation], list[str]]:
    """The one zone (or subnet) of the FSx file system and the problems that prevent choosing it.

    The rule: the file system is in the zone of **every pinned worker group whose jobs mount the shared
    claim** (``readers``: group -> its jobs; in practice the GPU/EFA groups that train), because Lustre
    traffic across zones costs and slows. So those groups must share one zone (else
    ``nodeGroups.<group>.availabilityZone`` is an error naming the groups, their jobs and the fixes), and
    ``storage.fsx.availabilityZone`` may only repeat it. Unpinned groups (several zones) and the system group
    reach the file system from any zone and do not decide. Without a pinned reader: the explicit key, else
    the zone of the only pinned group; several pinned groups without jobs, or none pinned, need the key.
    With an existing VPC the same holds for subnets (``subnetId``). The plan and these rules both call this.
    """
    fld = "subnetId" if existing_vpc else "availabilityZone"
    unit = "subnet" if existing_vpc else "zone"
    explicit = fsx.subnet_id if existing_vpc else fsx.availability_zone
    explicit_key = key(f"storage.fsx.{fld}")

    def place(g: NodeGroupConfig) -> Optional[str]:
        return g.subnet_id if existing_vpc else g.availability_zone

    def jobs_of(group: str) -> str:
        names = list(readers[group])
        return f"job{'s' if len(names) > 1 else ''} {', '.join(names)}"

    pinned = {name: at for name, g in groups.items() if (at := place(g)) is not None}
    pinned_readers = {g: pinned[g] for g in readers if g in pinned}
    problems: list[str] = []
    where: Optional[str] = None
    source = explicit_key
    if pinned_readers:
        first = next(iter(pinned_readers))
        where, source = pinned_readers[first], key(f"nodeGroups.{first}.{fld}")
        for g, at in pinned_readers.items():
            if at != where:
                problems.append(
                    f"{key(f'nodeGroups.{g}.{fld}')}: {at} differs from {source} ({where}), and the jobs of both "
                    f"groups mount the FSx for Lustre file system ({first}: {jobs_of(first)}; {g}: {jobs_of(g)}), "
                    f"which lives in one {unit}; pin {g} to {where}, run those jobs on one group, or use "
                    f"{key('storage.backend')}: efs (a mount target in every zone)"
                )
        if explicit is not None and explicit != where:
            problems.append(
                f"{explicit_key}: {explicit} is not where the jobs that mount the file system run ({source} is "
                f"{where}: {jobs_of(first)}); the file system must be in their {unit} (cross-zone traffic costs and "
                f"slows): set it to {where} or remove it"
            )
    elif explicit is not None:
        where = explicit
    elif len(set(pinned.values())) == 1:
        name = sorted(pinned)[0]
        where, source = pinned[name], key(f"nodeGroups.{name}.{fld}")
    elif pinned:
        listing = ", ".join(f"{n} ({z})" for n, z in sorted(pinned.items()))
        problems.append(
            f"{explicit_key}: several groups are pinned ({listing}) and no job runs on them; an FSx file system lives "
            f"in one {unit}: set it to that of the group that reads the data"
        )
    else:
        problems.append(
            f"{explicit_key}: an FSx file system lives in one {unit} and no worker group is pinned to one; set it, or "
            f"pin the group whose jobs read the data (nodeGroups.<group>.{fld}) and the file system follows it"
        )
    if where is None:
        return None, problems
    clients = sorted((n for n, w in pinned.items() if w == where), key=lambda n: (n not in readers, n))
    efa_clients = tuple(n for n in clients if groups[n].uses_efa(catalog))
    if fsx.efa and not efa_clients:
        problems.append(
            f"{key('storage.fsx.efa')}: an EFA-enabled file system needs EFA clients, and no EFA worker group runs in "
            f"{where}; set efa: false, or pin an EFA group (p4d, p5, p5en, p6-b200) there"
        )
    return FsxLocation(
        zone=None if existing_vpc else where,
        subnet_id=where if existing_vpc else None,
        key=source,
        client_groups=tuple(clients),
        efa_client_groups=efa_clients,
    ), problems


def check_storage(s: Sections, jobs: Mapping[str, JobConfig], problems: list[str]) -> None:
    """FSx: one zone where the jobs read (inside the VPC), EFA clients for an EFA file system, a kept file
    system only in an existing VPC; datasets given as an S3 prefix are imported by the file system's data
    repository (runs after :func:`check_jobs`, with the jobs' groups filled in)."""
    st = s.storage
    if "storage" in s.failed:
        return
    check_imported_datasets(s, problems)
    if st.backend != "fsx":
        return
    fsx = st.fsx_settings
    existing = _existing_vpc(s)
    if existing and fsx.availability_zone is not None:
        problems.append(
            f"{key('storage.fsx.availabilityZone')}: with existingVpc place the file system with subnetId instead"
        )
    if not existing and fsx.subnet_id is not None:
        problems.append(f"{key('storage.fsx.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
    if (
        existing
        and s.existing_vpc is not None
        and fsx.subnet_id is not None
        and fsx.subnet_id not in s.existing_vpc.private_subnet_ids
    ):
        problems.append(
            f"{key('storage.fsx.subnetId')}: {fsx.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}"
        )
    if (
        not existing
        and fsx.availability_zone is not None
        and s.network is not None
        and s.network.availability_zones
        and fsx.availability_zone not in s.network.availability_zones
    ):
        problems.append(
            f"{key('storage.fsx.availabilityZone')}: {fsx.availability_zone} is not one of "
            f"{key('network.availabilityZones')} {s.network.availability_zones}"
        )
    if st.file_system_id is not None and not existing:
        problems.append(
            f"{key('storage.fileSystemId')}: a kept Lustre file system lives in a subnet of the VPC it was created in; "
            "adopt it with existingVpc (that VPC and the file system's subnet)"
        )
    if st.retain_on_delete and not existing:
        problems.append(
            f"{key('storage.retainOnDelete')}: a kept Lustre file system keeps its network interfaces in its subnet, "
            "so the VPC this stack creates could not be deleted; keep it only with existingVpc, or keep the data in "
            f"S3 instead (the bucket of {key('storage.fsx.dataRepository.s3Path')} outlives the stack)"
        )
    if (
        any(f"nodeGroups.{n}" in s.failed for n in s.group_names)
        or any(job_path(s, n) in s.failed for n in s.job_names)
        or {"nodeGroups", "jobs", "existingVpc", "network"} & s.failed
    ):
        return  # the zones of groups, the groups of jobs or the VPC's kind are unknown: reported where they failed
    _, found = fsx_location(fsx, s.groups, claim_readers(jobs), existing, s.catalog)
    problems.extend(found)


def check_imported_datasets(s: Sections, problems: list[str]) -> None:
    """A dataset whose source is an S3 prefix (``s3://bucket/prefix/``, a folder of objects) is not staged:
    the FSx file system's data repository imports it, so it must lie under the linked path."""
    st = s.storage
    repo = st.fsx_settings.data_repository
    for name, d in s.datasets.items():
        if not d.is_prefix:
            continue
        path = f"datasets.{name}"
        if st.backend != "fsx":
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is an S3 prefix (a folder of objects), which only an FSx for "
                f"Lustre data repository imports; give one object to stage (a tarball, s3://bucket/key.tar.gz), or set "
                f"{key('storage.backend')}: fsx with {key('storage.fsx.dataRepository.s3Path')} covering it"
            )
        elif repo.bucket is None:
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is an S3 prefix, imported only from the bucket linked to the "
                f"file system, and this stack creates its own (objects under its {repo.import_prefix} prefix appear in "
                f"{repo.file_system_path}, output fsxDataRepositoryPath); link the dataset's bucket with "
                f"{key('storage.fsx.dataRepository.s3Path')}: s3://BUCKET/PREFIX/ above {d.source}"
            )
        elif repo.linked_path(d.source) is None:
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is not under {key('storage.fsx.dataRepository.s3Path')} "
                f"({repo.s3_path}), the only S3 prefix the file system imports; move the data there, or link a path "
                "above both"
            )
        elif "path" in d.model_fields_set:
            problems.append(
                f"{key(f'{path}.path')}: an imported dataset appears where the data repository puts it "
                f"({repo.linked_path(d.source)}); remove path"
            )


def cross_section(s: Sections) -> list[str]:
    """Every cross-section rule; returns the problems (the rules fill in nothing)."""
    problems: list[str] = []
    check_cluster_name(s, problems)
    check_network(s, problems)
    check_zone_forms(s, problems)
    check_system_group(s, problems)
    check_entry_names(s, problems)
    check_group_names(s, problems)
    for name, g in s.groups.items():
        check_group(s, name, g, problems)
    for name, types in s.failed_group_types.items():
        for i, t in enumerate(types):
            _known(s, t, f"nodeGroups.{name}.instanceTypes[{i}]", problems)
    check_images(s, problems)
    check_jobs(s, problems)
    check_storage(s, s.jobs, problems)
    groups = [("systemNodeGroup", s.system.ami_release, [s.system.instance_type])]
    groups += [(f"nodeGroups.{n}", g.ami_release, list(g.instance_types)) for n, g in s.groups.items()]
    problems.extend(ami_release_problems(s.cluster, groups, s.catalog))
    return problems


def check_topology(path: str, g: NodeGroupConfig, facts: list[InstanceType], problems: list[str]) -> None:
    """``topology: true`` needs types whose nodes all carry the same EC2 network-topology labels (the catalog's
    :data:`~components.catalog.NETWORK_TOPOLOGY`): Kueue places a topology-aware job only on nodes that carry every
    level's label, so on others it would never start."""
    if not g.topology:
        return
    layers = {f.name: NETWORK_TOPOLOGY[f.name].layers if f.name in NETWORK_TOPOLOGY else 0 for f in facts}
    if 0 in layers.values():
        without = ", ".join(n for n, v in layers.items() if not v)
        problems.append(
            f"{key(f'{path}.topology')}: {without} nodes carry no EC2 network-topology labels; remove "
            f"topology: true or use a type that has them ({', '.join(sorted(NETWORK_TOPOLOGY))})"
        )
    elif len(set(layers.values())) > 1:
        problems.append(
            f"{key(f'{path}.topology')}: the group's types have different network layers "
            f"({', '.join(f'{n} {v}' for n, v in layers.items())}); split them into groups"
        )
