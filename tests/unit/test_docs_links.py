"""Every internal link and anchor of the documentation points somewhere (the README, the files at the top and every
page of the site), every page of the site is in its table of contents, and the external-link check, which needs
internet and runs by hand (``python -m stacks docs --check-external``), can tell an answering address from a broken
one (shown against a local HTTP server)."""

import http.server
import re
import threading
from pathlib import Path
from typing import Iterator

import pytest

from stacks.docs import links
from tests.harness import REPO
from tests.wait import patient

DOCS = REPO / "docs"


def test_every_internal_link_and_anchor_points_somewhere() -> None:
    files = links.documentation_files()
    assert REPO / "README.md" in files and DOCS / "index.md" in files and len(files) > 40
    assert sum(len(links.links(f)) for f in files) > 300  # the walk reads the pages
    assert links.broken_links() == []


def test_the_link_check_finds_each_kind_of_broken_link(tmp_path: Path) -> None:
    (tmp_path / "docs" / "a").mkdir(parents=True)
    (tmp_path / "docs" / "a" / "page.md").write_text(
        "# A page\n\n## The `pulumi up` part\n\n## Twice\n\n## Twice\n\n"
        "[ok](../index.md) [ok](#the-pulumi-up-part) [ok](#twice-1) [ok](https://example.com/x)\n"
        "[no file](missing.md) [no anchor](../index.md#nowhere) [outside](../../README.md)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n<!-- [in a comment](nowhere.md) -->\n"
    )
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[page](a/page.md#twice)\n")
    (tmp_path / "README.md").write_text("# Top\n\n[site](docs/a/page.md#the-pulumi-up-part) [bad](docs/a/page.md#x)\n")
    found = links.broken_links(links.documentation_files(tmp_path), root=tmp_path)
    assert [re.sub(r": .*", "", f.split(": ", 1)[1]) for f in found] == [
        "docs/a/page.md#x",
        "missing.md",
        "../index.md#nowhere",
        "../../README.md",
    ], found


def test_headings_make_the_anchors_github_and_myst_make() -> None:
    text = "# The `pulumi up` part, in order\n\n## Twice\n\n## Twice\n\n### [A link](x.md) and *emphasis*\n"
    assert links.anchors(text) == {"the-pulumi-up-part-in-order", "twice", "twice-1", "a-link-and-emphasis"}


def test_every_page_of_the_site_is_in_its_table_of_contents() -> None:
    """Sphinx warns (an error in .ci/run) about a page no toctree names; this says the same in the fast tier."""
    named = set()
    for page in DOCS.rglob("*.md"):
        if "_build" in page.parts:
            continue
        for block in re.findall(r"```\{toctree\}\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                if line.strip() and not line.startswith(":"):
                    named.add((page.parent / f"{line.strip()}.md").resolve())
    pages = {p.resolve() for p in DOCS.rglob("*.md") if "_build" not in p.parts} - {(DOCS / "index.md").resolve()}
    assert pages - named == set()


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(200 if self.path == "/ok" else 405 if self.path == "/head-refused" else 404)
            self.end_headers()

        def do_GET(self) -> None:
            self.send_response(200 if self.path in ("/ok", "/head-refused") else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def test_the_external_check_tells_an_answering_address_from_a_broken_one(server: str, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"[a]({server}/ok) <{server}/head-refused> and {server}/gone.\n\n`{server}/in-code`\n")
    found = links.external_links([page])
    assert set(found) == {f"{server}/ok", f"{server}/head-refused", f"{server}/gone"}
    broken = links.broken_external_links([page], timeout=patient(10))
    assert len(broken) == 1 and broken[0].startswith(f"{server}/gone: HTTP 404 (") and "page.md:1" in broken[0]
