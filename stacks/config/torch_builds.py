"""Config rule: an image that installs torch in the build its GPUs need (the bundled training image) has one build
for every GPU of each group it runs on (:func:`components.catalog.torch.torch_build_for`)."""

from typing import Optional

from components.catalog.gpus import compute_capability
from components.catalog.instances import Catalog
from components.catalog.torch import TORCH_BUILDS, TORCH_VERSION, declares_torch_build, torch_build_for
from components.image.dockerfile import Dockerfile
from stacks.config.errors import key
from stacks.config.nodegroups import NodeGroupConfig


def torch_build_problems(
    catalog: Catalog,
    path: str,
    job_name: str,
    image_name: str,
    dockerfile: Optional[Dockerfile],
    group_name: str,
    group: NodeGroupConfig,
) -> list[str]:
    """What keeps ``image_name`` (built from ``dockerfile``) from having a torch build for the GPUs of ``group``:
    a GPU the catalog has no compute capability for, or GPUs no one build covers (nothing for other images)."""
    if dockerfile is None or not declares_torch_build(dockerfile.build_args()):
        return []
    where = f"{key(f'{path}')}: job {job_name} runs image {image_name!r}, which installs torch {TORCH_VERSION} in the "
    capabilities: dict[str, tuple[int, int]] = {}
    for t in group.instance_types:
        facts = catalog.get(t)
        if facts is None or not facts.is_gpu:
            continue
        cc = compute_capability(facts.gpu_model)
        if cc is None:
            return [
                f"{where}CUDA build of its GPUs, on {t} in node group {group_name}, whose GPU {facts.gpu_model!r} "
                "has no compute capability in the catalog (components/catalog/gpus.py), so which build runs on it is "
                "unknown; run the job on a group of catalogued GPUs"
            ]
        capabilities[f"{t} ({facts.gpu_model}, {cc[0]}.{cc[1]})"] = cc
    if torch_build_for(capabilities.values()) is not None:
        return []
    builds = "; ".join(f"{b.name}: {b.arch_flags}" for b in TORCH_BUILDS.values())
    return [
        f"{where}CUDA build of its GPUs, on node group {group_name}, whose types {', '.join(capabilities)} no one "
        f"build has kernels for ({builds}); put the types of each GPU generation in a node group of their own"
    ]
