"""The documentation a person can take in, measured: the README within 150 lines and 1,200 words; on the
README, every user page (the site's front page, the glossary, the tutorials, the how-to guides) and every explanation
page but the evidence page, sentences of at most 22 words on average and 60 at most, paragraphs of at most 120
words, no commit hash and no test path; the same limits on the contributor pages (the contributing guide and
ARCHITECTURE.md), which may name both; a glossary of at least 12 terms, each linked where a page first uses it; the
pages the issue names, with at least six pictures; and every shell block of the tutorials and how-to guides saying
what it needs, so the offline ones can be run (``tests/real/test_docs_commands_real.py``)."""

import re
from pathlib import Path

import pytest

from stacks.docs import prose
from tests.harness import REPO

DOCS = REPO / "docs"
USER_PAGES = prose.user_pages()
#: What each shell block of a tutorial or how-to guide needs, in the comment before it.
COMMAND_KINDS = ("offline", "internet", "aws", "box", "examples")
_SHELL_BLOCK = re.compile(
    r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```(?P<lang>bash|console|shell|sh)\n(?P<body>.*?)```", re.M | re.S
)


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(REPO)) for p in USER_PAGES])
def test_a_user_page_keeps_to_the_writing_rules(page: Path) -> None:
    m = prose.measure(page)
    assert m.sentences and m.paragraphs, "the measure reads the page"
    assert m.problems() == []
    assert prose.forbidden(page) == []


@pytest.mark.parametrize("page", prose.explanation_pages(), ids=lambda p: p.name)
def test_an_explanation_page_keeps_to_the_writing_rules(page: Path) -> None:
    """The same limits as a user page; the evidence pages (``verified.md``, ``test-runs.md``) keep the measurements and
    test paths."""
    assert prose.measure(page).problems() == []
    assert prose.forbidden(page) == []


@pytest.mark.parametrize("page", prose.contributor_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_a_contributor_page_keeps_to_the_writing_rules(page: Path) -> None:
    """The same limits on the contributing guide's pages and ARCHITECTURE.md; they may name test paths and the
    commits of measured runs."""
    m = prose.measure(page)
    assert m.sentences and m.paragraphs, "the measure reads the page"
    assert m.problems() == []


def test_the_contributor_pages_are_the_guide_and_the_architecture() -> None:
    names = [str(p.relative_to(REPO)) for p in prose.contributor_pages()]
    assert names == [
        "docs/contributing/index.md", "docs/contributing/layout.md", "docs/contributing/testing.md", "ARCHITECTURE.md"
    ]  # fmt: skip


@pytest.mark.parametrize("page", sorted((DOCS / "reference").glob("*.md")), ids=lambda p: p.name)
def test_a_reference_page_names_no_commit_or_test_path(page: Path) -> None:
    """The reference pages, generated from the code's docstrings too, keep the evidence on the evidence page."""
    assert prose.forbidden(page) == []


def test_the_readme_is_a_front_page() -> None:
    lines, words = prose.readme_size()
    assert lines <= prose.README_MAX_LINES and words <= prose.README_MAX_WORDS, (
        f"README.md has {lines} lines and {words} words, over {prose.README_MAX_LINES} or {prose.README_MAX_WORDS}: "
        "its generated tables count too (a new preset adds a row); shorten its prose"
    )
    readme = (REPO / "README.md").read_text()
    headings = re.findall(r"^## (.+)$", readme, re.M)
    for needed in ("What `pulumi up` builds", "The two commands", "Quick start", "Presets", "Documentation", "Tests"):
        assert needed in headings, needed
    assert "never yet run on a real AWS account" in readme and "docs/explanation/verified.md" in readme
    assert "(LICENSE)" in readme and "docs/contributing/index.md" in readme
    assert readme.count("```mermaid") == 1


def test_the_measures_can_fail(tmp_path: Path) -> None:
    """Controls: a long sentence, a long paragraph, a commit hash and a test path are each found; code, tables and
    comments are not prose."""
    page = tmp_path / "control.md"
    long_sentence = " ".join(["word"] * 61) + "."
    long_paragraph = " ".join(["Short words here."] * 41)
    page.write_text(
        f"# Control\n\n{long_sentence}\n\n{long_paragraph}\n\nSee 140c6e3 and tests/unit/test_docs.py.\n\n"
        f"```bash\n{long_sentence}\n```\n\n| {long_sentence} |\n|---|\n\n<!-- {long_sentence} -->\n"
    )
    m = prose.measure(page)
    assert max(m.sentences) == 61 and max(m.paragraphs) == 123 and len(m.problems()) == 2, m.problems()
    assert [f.split(": ", 1)[1].split(" ")[0:3] for f in prose.forbidden(page)] == [
        ["a", "commit", "hash"],
        ["a", "test", "path"],
    ]
    # another project's folder named like ours is not a test path of this repository
    assert not prose.TEST_PATH.search("https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md")
    assert prose.sentences("Use e.g. Kueue. It queues jobs. Then `pulumi up` runs.") == [
        "Use e.g. Kueue.",
        "It queues jobs.",
        "Then CODE runs.",
    ]


def test_the_glossary_defines_the_terms_and_the_pages_link_them() -> None:
    terms = prose.glossary_terms()
    assert len(terms) >= 12
    for needed in ("stack", "preset", "node-group", "box", "rehearse", "tier", "flavor"):
        assert needed in terms, needed
    glossary = prose.GLOSSARY.read_text()
    for heading in re.findall(r"^## (.+)$", glossary, re.M):
        definition = glossary.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
        assert prose.words(definition) >= 15, heading
    problems = [u for page in USER_PAGES if page != prose.GLOSSARY for u in prose.unlinked_terms(page, terms)]
    assert problems == []


def test_the_glossary_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "how-to").mkdir()
    glossary = tmp_path / "glossary.md"
    glossary.write_text(prose.GLOSSARY.read_text())
    page = tmp_path / "how-to" / "control.md"
    page.write_text(
        "# Control\n\nA [node group](../glossary.md#node-group) runs jobs; a stack has several node groups.\n\n"
        "`the box in code` and the [box](../glossary.md#box).\n"
    )
    assert [u.split(": ", 1)[1] for u in prose.unlinked_terms(page, glossary=glossary)] == [
        "the first 'stack' is not a link to the glossary (glossary.md#stack)"
    ]


def test_the_site_has_the_pages_by_what_the_reader_is_doing() -> None:
    expected = {
        "tutorials": ["local", "deploy-dev", "your-own-job"],
        "how-to": [
            "images-and-datasets", "regions-and-zones", "capacity", "fsx", "mpi", "tensorflow", "teams", "benchmarks",
            "gpus", "rehearse", "components", "monitoring", "upgrading", "update-project", "kubernetes-version",
            "node-images", "troubleshooting",
        ],
        "reference": [
            "configuration", "commands", "components", "outputs", "job-contract", "presets", "instance-types",
            "versions",
        ],
        "explanation": [
            "architecture", "pulumi-up", "failures", "storage", "admission", "operations", "security", "box",
            "programs", "preflight", "packaging", "verified", "test-runs",
        ],
        "contributing": ["index", "testing", "layout"],
    }  # fmt: skip
    for folder, pages in expected.items():
        assert sorted(p.stem for p in (DOCS / folder).glob("*.md")) == sorted(pages), folder
    for path in ("LICENSE", "CHANGELOG.md", "CONTRIBUTING.md", "requirements-docs.txt"):
        assert (REPO / path).is_file(), path
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text and len(license_text.splitlines()) > 190


def test_the_pictures() -> None:
    """At least six Mermaid pictures, among them the ones the issue names, each where its subject is."""
    pictures = {
        "README.md": "what one pulumi up builds",
        "ARCHITECTURE.md": "the path from stack file to resources",
        "docs/explanation/pulumi-up.md": "the order of pulumi up",
        "docs/explanation/admission.md": "a job's life under the queue",
        "docs/explanation/failures.md": "a stop and resume on a lost node",
        "docs/how-to/teams.md": "teams and their queues",
    }
    for path, what in pictures.items():
        assert "```mermaid\n" in (REPO / path).read_text(), (path, what)
    total = sum(
        p.read_text().count("```mermaid\n")
        for p in [REPO / "README.md", REPO / "ARCHITECTURE.md", *DOCS.rglob("*.md")]
        if "_build" not in p.parts
    )
    assert total >= 6, total
    admission = (DOCS / "explanation" / "admission.md").read_text()
    assert all(state in admission for state in ("Queued", "Admitted", "Running", "Stopped", "Completed"))


def _shell_blocks(page: Path) -> list[tuple[str, str]]:
    out = []
    for m in _SHELL_BLOCK.finditer(page.read_text()):
        if m.group("lang") == "console" and not re.search(r"^\$ ", m.group("body"), re.M):
            continue  # output shown, no command
        out.append((m.group("marker") or "", m.group("lang")))
    return out


@pytest.mark.parametrize(
    "page",
    sorted((DOCS / "tutorials").glob("*.md")) + sorted((DOCS / "how-to").glob("*.md")),
    ids=lambda p: p.name,
)
def test_every_shell_block_says_what_it_needs(page: Path) -> None:
    """A shell block of a tutorial or how-to guide is preceded by ``<!-- commands: KIND -->`` (KIND one of
    :data:`COMMAND_KINDS`) or is one of the own-job examples (``<!-- example NAME: run -->``), or shows output
    (```console``` without a ``$`` line, ```text```)."""
    for marker, lang in _shell_blocks(page):
        if marker.startswith("example ") and marker.endswith(": run"):
            continue
        kind = marker.removeprefix("commands: ").split(",")[0].strip()
        assert marker.startswith("commands: ") and kind in COMMAND_KINDS, (page.name, marker, lang)


def test_the_offline_commands_are_there_to_run() -> None:
    offline = [
        p.name
        for folder in ("tutorials", "how-to")
        for p in (DOCS / folder).glob("*.md")
        if "<!-- commands: offline -->" in p.read_text()
    ]
    assert len(offline) >= 6, offline
