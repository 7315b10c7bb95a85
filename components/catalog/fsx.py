"""FSx for Lustre facts: what a ``PERSISTENT_2`` SSD file system accepts, its ports and its CSI driver.

Every value names its source key (:data:`components.catalog.sources.SOURCES`). The config models
validate against these tables before anything is registered, so a value AWS would refuse after
minutes of ``pulumi up`` is a config error instead.
"""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog.platform import STORAGE_ADDON

#: The deployment type this project creates: SSD, replicated in one zone, linked to S3 through data
#: repository associations (``ImportPath``/``ExportPath`` are not supported on it; source key
#: ``fsx-api-lustre-configuration``).
FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
#: Lustre version: 2.15 is "recommended for all new file systems" and is the default for PERSISTENT_2
#: with a metadata configuration (source key ``fsx-api-create-file-system``).
FSX_LUSTRE_VERSION = "2.15"
#: Storage type: SSD, whose throughput tiers and capacities these are. Like the deployment type and a lower Lustre
#: version, a new one makes a new file system (pulumi-aws ``fsx.LustreFileSystem``; a higher Lustre version is
#: upgraded in place), so each update records them (:func:`stacks.plan.storage_change.fsx_record`).
FSX_STORAGE_TYPE = "SSD"
#: Per-unit storage throughput (MB/s per TiB) offered for PERSISTENT_2 SSD (source key
#: ``fsx-api-lustre-configuration``).
FSX_THROUGHPUT_TIERS: tuple[int, ...] = (125, 250, 500, 1000)
#: Storage capacity of a non-EFA PERSISTENT_2 SSD file system: 1200 GiB, 2400 GiB, then increments of
#: 2400 GiB (source key ``fsx-api-create-file-system``).
FSX_MIN_CAPACITY_GIB = 1200
FSX_CAPACITY_STEP_GIB = 2400
#: EFA-enabled file systems grow in steps that depend on the throughput tier (source key
#: ``fsx-increase-storage``): the capacity is a multiple of the tier's step.
FSX_EFA_CAPACITY_STEP_GIB: Mapping[int, int] = {125: 38400, 250: 19200, 500: 9600, 1000: 4800}
#: Metadata modes and the IOPS values USER_PROVISIONED accepts on SSD: 1500, 3000, 6000, 12000 and
#: multiples of 12000 up to 192000 (source key ``fsx-api-metadata-configuration``).
FSX_METADATA_MODES: tuple[str, ...] = ("AUTOMATIC", "USER_PROVISIONED")
FSX_METADATA_IOPS: tuple[int, ...] = (1500, 3000, 6000, *range(12000, 192001, 12000))
#: The metadata IOPS AUTOMATIC mode gives an SSD file system: (largest capacity in GiB, IOPS) in order, so 1500 at
#: 1200 GiB, 3000 at 2400, 6000 from 4800 to 9600 and 12000 from 12000 to 45600; above that, 12000 for every
#: 24000 GiB (source key ``fsx-metadata-performance``). A USER_PROVISIONED file system grows only with at least these
#: for its new capacity (source key ``fsx-metadata-growth``).
FSX_AUTOMATIC_METADATA_IOPS: tuple[tuple[int, int], ...] = ((1200, 1500), (2400, 3000), (9600, 6000), (45600, 12000))
FSX_AUTOMATIC_METADATA_IOPS_PER: tuple[int, int] = (24000, 12000)
#: Lustre traffic: TCP 988 and 1018-1023, between the file servers and from the clients (source key
#: ``fsx-lustre-security-groups``).
FSX_LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
#: Events a data repository association imports from / exports to S3 (source key ``fsx-dra``).
FSX_DRA_EVENTS: tuple[str, ...] = ("NEW", "CHANGED", "DELETED")
#: At most this many data repository associations per file system (source key ``fsx-dra``).
FSX_MAX_DRAS = 8
#: Longest S3 path / file-system path a data repository association accepts (source key ``fsx-dra``).
FSX_DRA_S3_PATH_MAX = 900
FSX_DRA_FS_PATH_MAX = 4096

#: The FSx CSI driver as an EKS managed add-on: add-on name, the controller's service account (the
#: one that calls AWS), the CSI driver name in PersistentVolumes (source keys ``eks-fsx-csi-addon``,
#: ``fsx-csi-chart-values``, ``fsx-csi-static-pv``).
FSX_CSI_ADDON = STORAGE_ADDON["fsx"]
FSX_CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
FSX_CSI_DRIVER = "fsx.csi.aws.com"


def fsx_automatic_metadata_iops(capacity_gib: int) -> int:
    """The metadata IOPS FSx's AUTOMATIC mode gives an SSD file system of ``capacity_gib``
    (:data:`FSX_AUTOMATIC_METADATA_IOPS`)."""
    for largest, iops in FSX_AUTOMATIC_METADATA_IOPS:
        if capacity_gib <= largest:
            return iops
    per_gib, iops = FSX_AUTOMATIC_METADATA_IOPS_PER
    return min(capacity_gib // per_gib * iops, FSX_METADATA_IOPS[-1])


def fsx_capacity_problem(capacity_gib: int, throughput: int, efa: bool) -> Optional[str]:
    """Why ``capacity_gib`` is not a valid PERSISTENT_2 SSD capacity (at this tier, with or without EFA),
    or ``None``. The message names the nearest valid values."""
    if efa:
        step = FSX_EFA_CAPACITY_STEP_GIB.get(throughput)
        if step is None:
            return None  # the throughput tier is reported on its own
        if capacity_gib <= 0 or capacity_gib % step:
            lower = max(step, capacity_gib // step * step)
            upper = (capacity_gib // step + 1) * step
            near = f"{lower}" if lower == upper else f"{lower} or {upper}"
            return (
                f"{capacity_gib} GiB is not a valid EFA-enabled capacity at {throughput} MB/s/TiB: EFA file systems "
                f"are multiples of {step} GiB at that tier (try {near})"
            )
        return None
    if capacity_gib in (FSX_MIN_CAPACITY_GIB, FSX_CAPACITY_STEP_GIB):
        return None
    if capacity_gib > FSX_CAPACITY_STEP_GIB and capacity_gib % FSX_CAPACITY_STEP_GIB == 0:
        return None
    if capacity_gib < FSX_MIN_CAPACITY_GIB:
        near = f"{FSX_MIN_CAPACITY_GIB}"
    elif capacity_gib < FSX_CAPACITY_STEP_GIB:
        near = f"{FSX_MIN_CAPACITY_GIB} or {FSX_CAPACITY_STEP_GIB}"
    else:
        lower = capacity_gib // FSX_CAPACITY_STEP_GIB * FSX_CAPACITY_STEP_GIB
        near = f"{lower} or {lower + FSX_CAPACITY_STEP_GIB}"
    return (
        f"{capacity_gib} GiB is not a valid {FSX_DEPLOYMENT_TYPE} SSD capacity: use 1200, 2400 or a multiple of "
        f"2400 GiB (try {near})"
    )


@dataclass(frozen=True, kw_only=True)
class HostRequirement:
    """What a node must have for a storage or network feature (a host-side fact)."""

    name: str
    """Short key (what a node group's ``host_setup`` lists)."""
    feature: str
    needs: tuple[str, ...]
    """What the node must have, in order."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""
    packages: tuple[str, ...] = ()
    """Amazon Linux 2023 packages the node's bootstrap installs for it (what the EKS AL2023 AMIs lack)."""
    bootstrapped: bool = False
    """The node groups derive its bootstrap (their launch templates' user data) for the groups that use the feature;
    a feature whose host side is not bootstrapped is refused by the config, not created to be used half-way."""


#: A node that mounts an FSx for Lustre file system needs the Lustre client: its kernel modules and its user-space
#: tools on the host. What the EKS AL2023 AMIs (``AMI_TYPES``, STANDARD and NVIDIA) carry, read from their build
#: (source key ``eks-ami-al2023-lustre``): the kernel modules, yes: the AL2023 kernel package provides
#: ``kmod-lustre-client`` (AWS's own AL2023 client setup installs no kmod, only the ``lustre-client`` package, and
#: loads ``lustre`` right after: source keys ``pcluster-al2023-lustre``, ``eks-fsx-csi-tuning``); the user-space tools,
#: no: the AMI build installs no ``lustre-client`` (its maintainers declined adding it and point to user data,
#: ``dnf install -y lustre-client``). The mount itself does not need them on the host: the FSx CSI node plugin runs
#: ``mount -t lustre`` with the helper its own image carries (source key ``fsx-csi-image``). But the client's kernel
#: modules apply the file system's persistent parameters (``lctl set_param -P``) by running the host's
#: ``/usr/sbin/lctl`` (source key ``lustre-param-upcall``; "needed for server to propagate different configurations
#: to the client", the CSI driver's maintainers, source key ``fsx-csi-host-userspace``), and the EKS guide's node
#: setup for FSx installs the package first (``eks-fsx-csi-tuning``). So every group whose pods mount the file system
#: installs ``lustre-client`` at bootstrap: AL2023 locks its repository to the AMI's release, so the package matches
#: the AMI's kernel modules.
FSX_CLIENT_HOST = HostRequirement(
    name="fsx-lustre-client",
    feature="the FSx for Lustre client on a node that mounts the file system",
    needs=(
        "the Lustre client kernel modules (the AL2023 kernel package provides kmod-lustre-client)",
        "the Lustre user-space tools on the host (/usr/sbin/lctl, which the kernel modules run to apply the file "
        "system's persistent parameters)",
    ),
    source="eks-ami-al2023-lustre",
    packages=("lustre-client",),
    bootstrapped=True,
)
#: A client reaches an EFA-enabled file system over EFA only when its host runs LNet over EFA: the EKS guide's node
#: bootstrap for it (source key ``eks-fsx-csi-efa``) checks the EFA kernel driver (>= 2.12.1, installing a newer one
#: otherwise), installs a Lustre client with EFA support, and configures an LNet ``efa`` network on the node's EFA
#: interfaces before the CSI driver mounts; without it the mount uses ``@tcp`` (the file system is still billed as
#: EFA-enabled). No node group of this project derives that bootstrap yet, so ``storage.fsx.efa`` is refused with
#: this reason (stacks/config/storage.py) rather than create a file system no node would reach over EFA.
FSX_EFA_CLIENT_HOST = HostRequirement(
    name="fsx-lnet-efa",
    feature="LNet over EFA to an EFA-enabled FSx for Lustre file system",
    needs=(
        "EFA kernel driver >= 2.12.1",
        "a Lustre client with EFA support",
        "an LNet efa network on the EFA interfaces",
    ),
    source="eks-fsx-csi-efa",
)
#: Every host-side fact of this module.
HOST_REQUIREMENTS: tuple[HostRequirement, ...] = (FSX_CLIENT_HOST, FSX_EFA_CLIENT_HOST)
#: The host-side facts by name.
HOST_REQUIREMENTS_BY_NAME: Mapping[str, HostRequirement] = {r.name: r for r in HOST_REQUIREMENTS}
#: The features whose host side the node groups bootstrap (their launch templates' user data).
NODE_BOOTSTRAP_PROVIDES: frozenset[str] = frozenset(r.feature for r in HOST_REQUIREMENTS if r.bootstrapped)
