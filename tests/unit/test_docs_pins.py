"""The day-two pages name the releases the code pins: a moved pin fails here until the page says what moves."""

import re

from components.catalog.charts import HELM_CHARTS, MANIFESTS
from tests.harness import REPO

#: The page that tells a user what taking a new version of the project moves.
UPDATE_PAGE = REPO / "docs" / "how-to" / "update-project.md"


def _previous_kueue() -> str:
    """The Kueue release the stacks pinned before the current one: the box builds it (box/kueue-previous)."""
    found = re.search(r"^require sigs\.k8s\.io/kueue v(\S+)$", (REPO / "box/kueue-previous/go.mod").read_text(), re.M)
    assert found, "box/kueue-previous/go.mod requires no sigs.k8s.io/kueue"
    return found.group(1)


def _mpi_operator() -> str:
    found = re.search(r"/mpi-operator/v(\d+\.\d+\.\d+)/", MANIFESTS["mpi-operator"].url)
    assert found, MANIFESTS["mpi-operator"].url
    return found.group(1)


def test_the_update_page_names_the_pinned_kueue_and_mpi_operator() -> None:
    current, previous, mpi = HELM_CHARTS["kueue"].version, _previous_kueue(), _mpi_operator()
    text = UPDATE_PAGE.read_text()
    named = {v.lstrip("v") for v in re.findall(r"\bv?\d+\.\d+\.\d+\b", text)}
    assert named == {current, previous, mpi}, (
        f"{UPDATE_PAGE.name} names releases {sorted(named)}; the code pins Kueue {current} (previously {previous}) "
        f"and the MPI Operator {mpi}: say what moves"
    )
    assert f"Kueue {previous} moves to {current}" in text
    assert f"v{mpi}. Its MPIJobs" in text
