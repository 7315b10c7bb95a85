"""Comments and docstrings explain the code as it is: no history ("used to"), no issue or review-finding numbers, no
commit a run was at. History goes to commit messages and CHANGELOG.md; measured runs with their commits go to the
testing page (docs/contributing/testing.md) and the page of what is verified."""

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

#: Where history is the content: the change log, and the pages of measured runs (each with its commit).
HISTORY_PAGES = {
    "CHANGELOG.md",
    "docs/contributing/testing.md",
    "docs/explanation/verified.md",
    "docs/explanation/test-runs.md",
}

NARRATION = [
    # "X used to do Y"; not the passive "is used to sign"
    re.compile(r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bwas )(?<!\bwere )(?<!\bbeing )\bused to\b"),
    re.compile(r"\b[Ii]ssue \d+"),
    re.compile(r"\b[Ff]inding \d+"),
    re.compile(r"\b(?:CI|run|clone) at [0-9a-f]{7,40}\b"),
]


def _narrations(text: str) -> list[str]:
    return [m.group(0) for pattern in NARRATION for m in pattern.finditer(text)]


def test_the_patterns_find_history_and_leave_plain_usage() -> None:
    assert _narrations("a checkpoint used to be written in the loop (issue 19, finding 4; CI at 5e77324)") == [
        "used to",
        "issue 19",
        "finding 4",
        "CI at 5e77324",
    ]
    assert _narrations("the key is used to sign the image; the role was used to pull it") == []


def test_no_comment_or_page_narrates_history() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.yaml"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for path in files:
        if path in HISTORY_PAGES or path == "tests/unit/test_comments.py":
            continue
        for number, line in enumerate((REPO / path).read_text(errors="replace").splitlines(), start=1):
            found += [f"{path}:{number}: {hit}" for hit in _narrations(line)]
    assert not found, "say what the code does now (history goes to CHANGELOG.md):\n" + "\n".join(found)
