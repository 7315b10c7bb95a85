"""The links of the documentation's Markdown: every internal link and anchor checked offline
(:func:`broken_links`, run by the fast tests), every external one on a machine with internet
(:func:`broken_external_links`, ``python -m stacks docs --check-external``).

A page's anchors are its headings' slugs as GitHub and the site (MyST's ``github`` slugs) make them. Pages of the site
(``docs/``) may link only to pages of the site, and the site's build checks the same with warnings as errors; the
README and the other files at the top link into the site by path."""

import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from stacks.stackfile import REPO

#: The site's source folder.
DOCS = REPO / "docs"
#: Markdown files at the top of the repository that are part of the documentation.
TOP_FILES = ("README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md")

_FENCE = re.compile(r"^(```+|~~~+).*?^\1[ \t]*$", re.M | re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_LINK = re.compile(
    r"(?<!!)\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<target><[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)"
)
_AUTOLINK = re.compile(r"<(?P<target>https?://[^>\s]+)>")
_BARE_URL = re.compile(r"(?<![(<\w])(?P<target>https?://[^\s<>`|)]+[^\s<>`|).,;:'\"])")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.M)
_GITHUB_CLEAN = re.compile(r"[^\w\u4e00-\u9fff\- ]")


@dataclass(frozen=True)
class Link:
    """A link of a page: where it is (file, line) and what it points to."""

    path: Path
    line: int
    target: str

    def __str__(self) -> str:
        where = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{where}:{self.line}: {self.target}"


def documentation_files(root: Path = REPO) -> list[Path]:
    """The Markdown files of the documentation: the top files that exist and every page under ``docs/`` (not the
    site's build output)."""
    top = [root / f for f in TOP_FILES if (root / f).is_file()]
    pages = sorted(p for p in (root / "docs").rglob("*.md") if "_build" not in p.relative_to(root).parts)
    return top + pages


def prose(text: str) -> str:
    """``text`` with code blocks and HTML comments blanked (line numbers kept): what is left is read for links."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return _COMMENT.sub(blank, _FENCE.sub(blank, text))


def plain_heading(title: str) -> str:
    """A heading's text as the renderers read it: links as their text, code spans as their content."""
    title = _LINK.sub(lambda m: m.group("text"), title)
    return re.sub(r"(`+)(.+?)\1", lambda m: m.group(2), title)


def slug(title: str) -> str:
    """A heading's anchor, as GitHub and MyST's ``github`` preset make it."""
    return _GITHUB_CLEAN.sub("", plain_heading(title).lower().replace(" ", "-"))


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page (a repeated title gets ``-1``, ``-2``... as GitHub and MyST number them)."""
    out: set[str] = set()
    for m in _HEADING.finditer(prose(text)):
        base = slug(m.group("title"))
        name, i = base, 1
        while name in out:
            name, i = f"{base}-{i}", i + 1
        out.add(name)
    return out


def links(path: Path) -> list[Link]:
    """Every link of a Markdown file outside code: inline links, autolinks and bare URLs."""
    text = prose(path.read_text())
    no_code = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)
    found: list[tuple[int, str]] = []
    for m in _LINK.finditer(no_code):
        found.append((m.start(), m.group("target").strip("<>")))
    masked = _LINK.sub(lambda m: " " * len(m.group(0)), no_code)
    for m in _AUTOLINK.finditer(masked):
        found.append((m.start(), m.group("target")))
    masked = _AUTOLINK.sub(lambda m: " " * len(m.group(0)), masked)
    for m in _BARE_URL.finditer(masked):
        found.append((m.start(), m.group("target")))
    return [Link(path, text.count("\n", 0, at) + 1, target) for at, target in sorted(found)]


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target))


def _problem(link: Link, root: Path) -> Optional[str]:
    target = link.target
    if not target:
        return "an empty link"
    if is_external(target):
        return None if target.startswith(("https://", "http://", "mailto:")) else "an unknown scheme"
    file_part, _, anchor = target.partition("#")
    dest = (link.path.parent / file_part).resolve() if file_part else link.path
    if not dest.exists():
        return "no such file"
    docs = (root / "docs").resolve()
    if link.path.resolve().is_relative_to(docs) and not dest.resolve().is_relative_to(docs):
        return "a page of the site links outside docs/ (the site cannot serve it: name the file in code instead)"
    if anchor:
        if dest.is_dir() or dest.suffix != ".md":
            return "an anchor into a file that is not a Markdown page"
        if anchor not in anchors(dest.read_text()):
            return f"no heading with the anchor #{anchor} in {dest.relative_to(root.resolve())}"
    return None


def broken_links(files: Optional[Iterable[Path]] = None, root: Path = REPO) -> list[str]:
    """Every internal link of ``files`` (default: :func:`documentation_files`) that points nowhere: a missing file, a
    missing anchor, a page of the site that links outside it. Each as ``path:line: target: problem``."""
    out = []
    for path in files if files is not None else documentation_files(root):
        for link in links(path):
            problem = _problem(link, root)
            if problem:
                out.append(f"{link}: {problem}")
    return out


def external_links(files: Optional[Iterable[Path]] = None) -> dict[str, list[Link]]:
    """Every external ``http(s)`` address of ``files``, with where it is used."""
    out: dict[str, list[Link]] = {}
    for path in files if files is not None else documentation_files():
        for link in links(path):
            if link.target.startswith(("https://", "http://")):
                out.setdefault(link.target.split("#")[0], []).append(link)
    return out


def _fetch(url: str, timeout: float) -> Optional[str]:
    """``None`` when ``url`` answers (a HEAD, else a GET, below status 400), else what went wrong."""
    headers = {"User-Agent": "eks-training-docs-linkcheck/1 (+python urllib)"}
    for method in ("HEAD", "GET"):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers), timeout=timeout):
                return None
        except urllib.error.HTTPError as exc:
            if method == "GET" or exc.code not in (403, 404, 405, 429, 501):
                return f"HTTP {exc.code}"
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            if method == "GET":
                return str(getattr(exc, "reason", exc))
    return None


def broken_external_links(
    files: Optional[Iterable[Path]] = None, *, timeout: float = 20.0, workers: int = 8
) -> list[str]:
    """Every external address of ``files`` that does not answer, with where it is used: ``url: problem (path:line,
    ...)``. Needs internet; not run by the tests' tiers (``python -m stacks docs --check-external``)."""
    found = external_links(files)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip(found, pool.map(lambda u: _fetch(u, timeout), found)))
    return [
        f"{url}: {problem} ({', '.join(str(link).rsplit(': ', 1)[0] for link in found[url])})"
        for url, problem in results.items()
        if problem
    ]
