"""The catalog holds facts with public sources, and the repository stands on its own."""

import dataclasses
import importlib
import re
import subprocess
from typing import Iterator, Mapping

import pytest

from components.catalog import (
    CA_CHART_WITH_VOLUMEATTACHMENTS,
    CHART_IMAGES,
    CLUSTER_AUTOSCALER,
    DEFAULT_KUBERNETES_VERSION,
    FSX_EFA_CAPACITY_STEP_GIB,
    FSX_LUSTRE_PRICES,
    FSX_LUSTRE_STORAGE_QUOTA,
    FSX_METADATA_IOPS,
    FSX_THROUGHPUT_TIERS,
    HELM_CHARTS,
    IMAGES,
    INSTANCE_TYPES,
    KUBERNETES_VERSIONS,
    KUEUE_SECOND_PASS_FIX,
    MANIFESTS,
    NVIDIA_AMI_FAMILIES,
    QUOTA_NAMES,
    SOURCES,
    SUPPORTED_KUBERNETES_VERSIONS,
    fsx_automatic_metadata_iops,
    fsx_capacity_problem,
)
from components.catalog.environment import CLUSTER_VARIABLES
from components.catalog.limits import NAME_LIMITS
from components.catalog.sources import Source
from stacks.box.charts import NOT_AT_HAND
from tests.harness import REPO


def test_every_source_is_a_public_address() -> None:
    for name, source in SOURCES.items():
        assert source.url.startswith("https://"), name
        assert source.shows, name


#: A GitHub file or folder at a ref: ``github.com/<owner>/<repo>/(blob|tree|raw)/<ref>/...`` or
#: ``raw.githubusercontent.com/<owner>/<repo>/<ref>/...``.
GITHUB_FILE = re.compile(
    r"(?:github\.com/[\w.-]+/[\w.-]+/(?:blob|tree|raw)|raw\.githubusercontent\.com/[\w.-]+/[\w.-]+)/(?P<ref>[^/?#]+)"
)
#: Branch names: a file there is whatever the branch holds today (or nothing, once the file moves or goes), not what
#: the source's ``shows`` says. A commit or a tag stays.
MOVING_REFS = {"main", "master", "develop", "HEAD"}


def moving_branch_sources(sources: Mapping[str, Source]) -> list[str]:
    """A line per source whose address is a GitHub file on a branch instead of a commit or a tag."""
    return [
        f"{key}: {source.url} is on the branch {m['ref']}; pin it to a commit (the 40-hex SHA of one where the file "
        "still shows what `shows` says) or to a tag"
        for key, source in sources.items()
        for m in [GITHUB_FILE.search(source.url)]
        if m and m["ref"] in MOVING_REFS
    ]


def test_every_github_file_source_is_pinned() -> None:
    """A source that cites a file on GitHub names the commit (or tag) whose content it read: a branch moves, and
    a file deleted or moved on it leaves a dead link (amazon-eks-ami's eni-max-pods.txt on main)."""
    moving = moving_branch_sources(SOURCES)
    assert moving == [], "components/catalog/sources.py:\n" + "\n".join(moving)


def test_the_moving_branch_check_can_fail() -> None:
    def source(url: str) -> Source:
        return Source(url=url, shows="x")

    pinned = "https://github.com/o/r/blob/2377b69aaeb8d751af1a265c2bfbeb94e6f6da90/a/b.txt"
    moving = {
        "on-main": source("https://github.com/o/r/blob/main/a/b.txt"),
        "on-master-folder": source("https://github.com/o/r/tree/master/charts/x/"),
        "on-develop": source("https://github.com/o/r/blob/develop/a.rb"),
        "raw-head": source("https://raw.githubusercontent.com/o/r/HEAD/a.yaml"),
    }
    fine = {
        "commit": source(pinned),
        "commit-lines": source(pinned + "#L36-L57"),
        "tag": source("https://github.com/o/r/blob/v1.2.3/a.md"),
        "release-tag": source("https://github.com/o/r/tree/cluster-autoscaler-1.36.1/x"),
        "issue": source("https://github.com/o/r/issues/973"),
        "pull": source("https://github.com/o/r/pull/65"),
        "releases": source("https://github.com/o/r/releases/tag/v1.2.3"),
        "commit-page": source("https://github.com/o/r/commit/895662de1ae77feda0822eea72c321bdfb829a27"),
        "not-github": source("https://docs.aws.amazon.com/eks/latest/userguide/main/x.html"),
    }
    found = moving_branch_sources({**moving, **fine})
    assert [line.split(":", 1)[0] for line in found] == list(moving), found
    assert "pin it to a commit" in found[0]


def _facts(value: object) -> Iterator[object]:
    """Every dataclass instance reachable from ``value`` through mappings, sequences and dataclass fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield value
        for f in dataclasses.fields(value):
            yield from _facts(getattr(value, f.name))
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _facts(v)
    elif isinstance(value, (list, tuple, frozenset, set)):
        for v in value:
            yield from _facts(v)


def test_every_fact_names_a_known_source() -> None:
    """Every fact row in every catalog module (any dataclass with a ``source`` or ``sources`` field) names
    sources that exist; the first word of a source text is its key."""
    rows = 0
    for module_name in sorted(
        p.stem for p in (REPO / "components" / "catalog").glob("*.py") if p.stem not in ("__init__", "sources")
    ):
        module = importlib.import_module(f"components.catalog.{module_name}")
        for name, value in vars(module).items():
            if name.startswith("_") or isinstance(value, type):
                continue
            for fact in _facts(value):
                keys = list(getattr(fact, "sources", ())) + [getattr(fact, k, None) for k in ("source", "peak_source")]
                for k in keys:
                    if isinstance(k, str):
                        rows += 1
                        assert k.split(" ", 1)[0] in SOURCES, (
                            f"components.catalog.{module_name}.{name}: unknown source {k!r}"
                        )
    assert rows > len(INSTANCE_TYPES) + len(NAME_LIMITS)
    for t in INSTANCE_TYPES.values():
        assert t.sources, t.name


def test_every_source_key_the_code_names_exists() -> None:
    """Facts written as constants cite their source in a comment ("source key ``k``", "source keys ``a``, ``b``")."""
    named: set[str] = set()
    for path in [*(REPO / "components").rglob("*.py"), *(REPO / "stacks").rglob("*.py")]:
        for m in re.finditer(r"source keys?\s+((?:``[^`]+``[\s,#:]*(?:and\s+)?)+)", path.read_text()):
            named |= set(re.findall(r"``([^`]+)``", m.group(1)))
    assert {"eks-pod-identity", "aws-network-policy-node-ip", "cluster-autoscaler-releases"} <= named, (
        "the search finds them"
    )
    assert named <= set(SOURCES), named - set(SOURCES)


#: ``registry/repository:tag@sha256:<64 hex>``.
PINNED_REF = re.compile(r"^[^@\s]+:(?P<tag>[\w.-]+)@(?P<digest>sha256:[0-9a-f]{64})$")
#: How a source's ``shows`` quotes a digest: ``sha256:`` + its first 12 and last 5 hex characters.
QUOTED_DIGEST = re.compile(r"sha256:[0-9a-f]{12}\.\.\.[0-9a-f]{5}")


def _pinned_images() -> Iterator[tuple[str, object]]:
    """Every catalog fact that pins an image (a ``ref`` and the ``source`` showing its digest), with where it is."""
    for path in sorted((REPO / "components" / "catalog").glob("*.py")):
        if path.stem in ("__init__", "sources"):
            continue
        module = importlib.import_module(f"components.catalog.{path.stem}")
        for name, value in vars(module).items():
            if name.startswith("_") or isinstance(value, type):
                continue
            for fact in _facts(value):
                if isinstance(getattr(fact, "ref", None), str) and isinstance(getattr(fact, "source", None), str):
                    yield f"components.catalog.{path.stem}.{name}", fact


def test_every_pinned_digest_has_a_source_that_shows_it() -> None:
    """Every image the catalog pins (the Helm releases' controllers, cluster-autoscaler per minor, the workloads'
    helpers, the Dockerfiles' bases) is ``repository:tag@sha256:<digest>``, and its source quotes that digest as the
    first one after the tag (so two tags' digests swapped fail); no digest is written in the catalog outside them."""
    pinned: set[str] = set()
    for where, image in _pinned_images():
        ref, source = getattr(image, "ref"), getattr(image, "source")
        m = PINNED_REF.match(ref)
        assert m, f"{where}: {ref} is not repository:tag@sha256:<digest>"
        shows = SOURCES[source].shows
        digest = m["digest"]
        at = shows.find(m["tag"])
        assert at >= 0, f"{where}: source {source} does not name the tag {m['tag']}"
        quoted = QUOTED_DIGEST.search(shows, at + len(m["tag"]))
        assert quoted is not None and quoted.group() == f"{digest[:19]}...{digest[-5:]}", (
            f"{where}: source {source} does not show {digest} for {m['tag']} (it quotes "
            f"{quoted.group() if quoted else 'no digest'} after the tag)"
        )
        pinned.add(digest)
    expected = [*(r.image for r in CLUSTER_AUTOSCALER.values()), *CHART_IMAGES.values(), *IMAGES.values()]
    assert {PINNED_REF.match(i.ref)["digest"] for i in expected} <= pinned  # type: ignore[index]
    for path in (REPO / "components" / "catalog").glob("*.py"):
        if path.stem != "sources":
            for digest in re.findall(r"sha256:[0-9a-f]{64}", path.read_text()):
                assert digest in pinned, f"{path.name}: {digest} is pinned without a source that shows it"


def test_chart_images_are_their_charts_release() -> None:
    """A chart's pinned controller image is the release the chart version installs (its tag is ``v`` + the chart's
    appVersion, equal to its version for these charts)."""
    for key, image in CHART_IMAGES.items():
        m = PINNED_REF.match(image.ref)
        assert m and m["tag"] == f"v{HELM_CHARTS[key].version.lstrip('v')}", (key, image.ref)


def test_every_pinned_chart_has_a_source_that_shows_its_version() -> None:
    """A chart's source quotes the version the catalog pins, so a moved pin moves its source's ``shows`` too."""
    charts = {**HELM_CHARTS, **{f"cluster-autoscaler for {m}": r.chart for m, r in CLUSTER_AUTOSCALER.items()}}
    stale = [f"{key} {c.version}: {c.source}" for key, c in charts.items() if c.version not in SOURCES[c.source].shows]
    assert stale == [], "components/catalog/sources.py: these sources' shows do not quote the pinned chart version"


#: A GitHub address at a ref: its repository and the ref (a tag or a commit; a branch moves, so it is no pin).
GITHUB_AT_REF = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:blob|tree|raw)/([\w.-]+)")
BRANCHES = {"main", "master"}


def pinned_chart_refs(texts: Mapping[str, str]) -> dict[str, dict[str, set[str]]]:
    """Each pinned chart's and release manifest's GitHub repository (from its source and the box's ``NOT_AT_HAND``)
    -> each ref the texts name it at -> the files that do."""
    urls = [SOURCES[c.source].url for c in [*HELM_CHARTS.values(), *MANIFESTS.values()]] + list(NOT_AT_HAND.values())
    # the cluster autoscaler's repository: one chart per Kubernetes minor, several releases on purpose
    per_minor = [SOURCES[r.chart.source].url for r in CLUSTER_AUTOSCALER.values()]
    repos = {m[1] for url in urls for m in [GITHUB_AT_REF.search(url)] if m} - {
        m[1] for url in per_minor for m in [GITHUB_AT_REF.search(url)] if m
    }
    found: dict[str, dict[str, set[str]]] = {repo: {} for repo in repos}
    for path, text in texts.items():
        for repo, ref in GITHUB_AT_REF.findall(text):
            if repo in found and ref not in BRANCHES:
                found[repo].setdefault(ref, set()).add(path)
    return found


def test_every_address_of_a_pinned_chart_names_one_release() -> None:
    """The code, docs and box cite a chart's or a release manifest's repository at one tag or commit: a bumped pin
    leaves no comment, source or stand-in at the release before it (ARCHITECTURE.md's recipe for a pinned version)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    texts = {p: (REPO / p).read_text(errors="ignore") for p in tracked if p.endswith((".py", ".md", ".yaml", ".txt"))}
    found = pinned_chart_refs(texts)
    assert found["NVIDIA/k8s-device-plugin"], found
    mixed = {repo: refs for repo, refs in found.items() if len(refs) > 1}
    assert mixed == {}, f"a chart's repository cited at several releases (bump them together): {mixed}"


def test_the_one_release_check_can_fail() -> None:
    plugin = "https://github.com/NVIDIA/k8s-device-plugin"  # a variable: the check above does not read these refs
    texts = {
        "a.py": f"# {plugin}/tree/v0.19.0/deployments/helm",
        "b.md": f"{plugin}/blob/v0.20.0/README.md, {plugin}/tree/main/docs",  # a branch is no release
    }
    assert set(pinned_chart_refs(texts)["NVIDIA/k8s-device-plugin"]) == {"v0.19.0", "v0.20.0"}


def test_the_pinned_kueue_places_autoscaled_topology_jobs_of_any_size() -> None:
    """Autoscaled groups of types with EC2 network-topology labels are topology-aware by default
    (stacks/plan/admission.py ``with_topology``): that needs a Kueue whose second pass (after the ProvisioningRequest)
    does not count a job's own quota twice, else it never places a job of more than half the group, as the EFA presets'
    are (source key ``kueue-second-pass-fix``). A chart pinned before the fix fails here."""
    pinned = tuple(int(x) for x in HELM_CHARTS["kueue"].version.lstrip("v").split("."))
    assert pinned >= KUEUE_SECOND_PASS_FIX, (pinned, KUEUE_SECOND_PASS_FIX)
    assert SOURCES["kueue-second-pass-fix"].url.startswith("https://github.com/kubernetes-sigs/kueue/")


def test_instance_facts_are_plausible() -> None:
    for name, t in INSTANCE_TYPES.items():
        assert t.name == name and t.vcpus > 0 and t.memory_mib > 0 and t.network_gbps > 0
        assert (t.gpu_model is None) == (t.gpus == 0), name
        if t.supports_efa:
            assert t.max_efa_interfaces == t.network_cards, name
        if t.allocatable_cpu_m is not None:
            assert t.allocatable_cpu_m < t.vcpus * 1000 and t.allocatable_memory_mib is not None
            assert t.allocatable_memory_mib < t.memory_mib


def test_every_instance_type_has_its_pod_limit() -> None:
    """A type without its ENI figure would plan 110 pods a node (the kubelet's default) whatever EKS gives it."""
    from components.catalog import ENI_MAX_PODS

    assert sorted(set(INSTANCE_TYPES) ^ set(ENI_MAX_PODS)) == [], "add the type's row to ENI_MAX_PODS (instances.py)"


def test_every_efa_family_has_its_environment() -> None:
    """The EFA pods' NCCL and libfabric variables are looked up by family; a family without its line would get the
    common ones only, with nothing failing."""
    from components.catalog import EFA_ENV_BY_FAMILY

    efa = {t.family for t in INSTANCE_TYPES.values() if t.supports_efa}
    assert sorted(efa ^ set(EFA_ENV_BY_FAMILY)) == [], "add the family's line to EFA_ENV_BY_FAMILY (efa.py)"


def test_every_kubernetes_version_has_an_autoscaler_that_can_scale() -> None:
    """Each supported minor maps to the autoscaler image of the same minor and a chart whose ClusterRole has
    what autoscaler 1.32+ waits for (volumeattachments, from chart 9.46.3): without it the pod runs but never
    scales (https://github.com/kubernetes/autoscaler/issues/7663)."""
    assert DEFAULT_KUBERNETES_VERSION == SUPPORTED_KUBERNETES_VERSIONS[-1]
    assert set(CLUSTER_AUTOSCALER) == set(SUPPORTED_KUBERNETES_VERSIONS) == set(KUBERNETES_VERSIONS)
    for version in SUPPORTED_KUBERNETES_VERSIONS:
        release = CLUSTER_AUTOSCALER[version]
        assert re.search(rf":v{re.escape(version)}\.\d+@sha256:[0-9a-f]{{64}}$", release.image.ref), release.image
        chart = tuple(int(x) for x in release.chart.version.split("."))
        assert chart >= CA_CHART_WITH_VOLUMEATTACHMENTS, version
        # the ClusterRole a user can open is the one of this very chart release
        assert release.clusterrole.startswith("https://github.com/kubernetes/autoscaler/blob/")
        assert f"/cluster-autoscaler-chart-{release.chart.version}/" in release.clusterrole
        assert release.clusterrole.endswith("/templates/clusterrole.yaml")
        v = KUBERNETES_VERSIONS[version]
        assert v.released < v.end_of_standard < v.end_of_extended


#: A path to a folder beside the clone, or a developer's private notes: a user's clone has neither. Written as
#: patterns, so this file does not match itself.
OUTSIDE_THE_REPOSITORY = re.compile(r"\.\./sh[a]red\b|field[- _]?n[o]tes", re.IGNORECASE)


def test_nothing_in_the_repository_reads_or_cites_files_outside_it() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for path in tracked:
        try:
            text = (REPO / path).read_text(errors="ignore")
        except (IsADirectoryError, FileNotFoundError):
            continue
        if OUTSIDE_THE_REPOSITORY.search(text):
            offenders.append(path)
    assert not offenders, offenders


def test_the_outside_reference_check_can_fail() -> None:
    for text in ("see ../" + "shared/x.md", "the field" + "-notes say", "Field " + "Notes"):
        assert OUTSIDE_THE_REPOSITORY.search(text), text
    assert not OUTSIDE_THE_REPOSITORY.search("/data/shared/etcd and the shared volume")


def test_fsx_tables_agree() -> None:
    """Every throughput tier has a price and an EFA capacity step; prices rise with the tier."""
    assert set(FSX_LUSTRE_PRICES) == set(FSX_THROUGHPUT_TIERS) == set(FSX_EFA_CAPACITY_STEP_GIB)
    prices = [FSX_LUSTRE_PRICES[t].usd for t in sorted(FSX_THROUGHPUT_TIERS)]
    assert prices == sorted(prices) and len(set(prices)) == len(prices)
    assert all(p.unit == "GB-month" for p in FSX_LUSTRE_PRICES.values())
    # the EFA step halves as the tier doubles (the same throughput capacity per step)
    assert {t * FSX_EFA_CAPACITY_STEP_GIB[t] for t in FSX_THROUGHPUT_TIERS} == {125 * 38400}
    assert FSX_METADATA_IOPS[:4] == (1500, 3000, 6000, 12000) and FSX_METADATA_IOPS[-1] == 192000
    assert all(b - a == 12000 for a, b in zip(FSX_METADATA_IOPS[3:], FSX_METADATA_IOPS[4:]))
    assert QUOTA_NAMES[FSX_LUSTRE_STORAGE_QUOTA[1]] == "Lustre Persistent_2 storage capacity"


@pytest.mark.parametrize(
    "capacity,tier,efa,ok",
    [
        (1200, 250, False, True),
        (2400, 125, False, True),
        (4800, 1000, False, True),
        (1000, 250, False, False),
        (1800, 250, False, False),
        (3600, 500, False, False),
        (4800, 1000, True, True),
        (9600, 500, True, True),
        (19200, 250, True, True),
        (38400, 125, True, True),
        (2400, 1000, True, False),
        (19200, 125, True, False),
    ],
)
def test_fsx_capacity_increments(capacity: int, tier: int, efa: bool, ok: bool) -> None:
    problem = fsx_capacity_problem(capacity, tier, efa)
    assert (problem is None) == ok, problem
    if problem:
        assert str(capacity) in problem and "try" in problem


@pytest.mark.parametrize(
    "capacity,iops",
    [
        (1200, 1500),
        (2400, 3000),
        (4800, 6000),
        (9600, 6000),
        (12000, 12000),
        (45600, 12000),
        (48000, 24000),
        (50400, 24000),
        (72000, 36000),
        (384000, 192000),
        (480000, 192000),
    ],
)
def test_fsx_automatic_metadata_iops(capacity: int, iops: int) -> None:
    """AUTOMATIC's metadata IOPS by capacity (FSx's managing-metadata-performance page), each a value USER_PROVISIONED
    accepts too, so a user can keep what AUTOMATIC gave."""
    assert fsx_automatic_metadata_iops(capacity) == iops
    assert iops in FSX_METADATA_IOPS


def test_every_duration_names_its_source_or_why_it_is_an_estimate() -> None:
    """The creation times the plan's path adds up (components/catalog/timings.py): each a positive figure (a
    provider's configuration: none) with a public source, or the reason it is an estimate."""
    from components.catalog import timings

    rows = [*timings.CREATION.values()] + [
        v for v in vars(timings).values() if isinstance(v, timings.Duration) and v not in timings.CREATION.values()
    ]
    assert len(rows) >= len(timings.CREATION) + 6
    for d in rows:
        assert d.sources or d.estimate, d.what
        assert all(k in SOURCES for k in d.sources), d.what
        assert d.minutes > 0 or d is timings.OTHER, d.what


def test_the_variables_the_cluster_adds_are_told_from_others() -> None:
    """The ``$(NAME)`` rule leaves these alone: a Service's links (the kubelet), Pod Identity's, the device plugin's."""
    added = (
        "KUBERNETES_SERVICE_HOST",
        "ETCD_SERVICE_PORT",
        "ETCD_SERVICE_PORT_CLIENT",
        "ETCD_PORT",
        "ETCD_PORT_2379_TCP",
        "ETCD_PORT_2379_TCP_ADDR",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "NVIDIA_VISIBLE_DEVICES",
    )
    assert [n for n in added if not any(c.names(n) for c in CLUSTER_VARIABLES)] == []
    others = ("LR", "PORT", "SERVICE_HOST", "MY_PORTS", "ETCD_PORT_2379", "AWSREGION")
    assert [n for n in others if any(c.names(n) for c in CLUSTER_VARIABLES)] == []


def test_every_catalog_gpu_type_boots_the_nvidia_ami() -> None:
    """A GPU group's nodes run EKS's AL2023 NVIDIA AMI: every GPU type the catalog lists is of a family it supports
    (a stack's own instanceFacts are not held to this list: they describe types newer than the catalog)."""
    gpu_types = [t for t in INSTANCE_TYPES.values() if t.is_gpu]
    assert gpu_types
    assert [t.name for t in gpu_types if t.name.split(".")[0] not in NVIDIA_AMI_FAMILIES] == []


#: Where prose lists the instance types with a network topology (topology-aware placement by default).
TOPOLOGY_LISTS = ("stacks/config/nodegroups.py", "docs/how-to/update-project.md", "CHANGELOG.md")


def test_every_list_of_the_topology_types_is_the_catalogs() -> None:
    """Adding a type's line to ``topology.py`` turns on topology-aware placement for its groups: each list of those
    types a user reads names it, as itself or by its family (``p5`` for p5.48xlarge), and names no other."""
    from components.catalog import NETWORK_TOPOLOGY

    stale = []  # every stale list at once: a new type's line makes each of them stale
    for path in TOPOLOGY_LISTS:
        text = " ".join((REPO / path).read_text().split())
        lists = re.findall(r"\bp3dn(?:, [\w.-]+)*,? (?:and|or) [\w.-]+", text)
        if not lists:
            stale.append(f"{path}: no list of the topology types")
        for found in lists:
            names = {n.rstrip(".") for n in re.split(r",? (?:and|or) |, ", found)}
            missing = [t for t in NETWORK_TOPOLOGY if t not in names and t.split(".")[0] not in names]
            extra = [n for n in names if not any(n in (t, t.split(".")[0]) for t in NETWORK_TOPOLOGY)]
            if missing or extra:
                stale.append(f"{path}: {found!r} misses {missing}, names {extra} besides")
    assert stale == []
