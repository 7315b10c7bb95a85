"""The writing rules of the user pages (the README, the tutorials, the how-to guides, the site's front page and the
glossary), measured: sentences of at most :data:`MAX_SENTENCE` words and :data:`MAX_AVERAGE` on average, paragraphs
of at most :data:`MAX_PARAGRAPH` words (the explanation and contributor pages too), no commit hash and no test path
(those belong to the evidence and contributing pages), the README within :data:`README_MAX_LINES` lines and
:data:`README_MAX_WORDS` words, and every glossary term linked to the glossary where a page first uses it.
``tests/unit/test_docs_prose.py`` fails on a regression.

What is measured is the prose: code blocks, HTML comments, headings and tables are left out, a link counts as its
text and a code span as one word. A sentence ends at ``.``, ``!`` or ``?`` followed by a space and a capital, a digit
or a code span; a list item is a paragraph of its own."""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from stacks.docs.links import DOCS, REPO, prose

MAX_SENTENCE = 60
MAX_AVERAGE = 22.0
MAX_PARAGRAPH = 120
README_MAX_LINES = 150
README_MAX_WORDS = 1200
#: The glossary: one ``## Term`` heading per term; a ``<!-- also: form, form -->`` line under it names other forms, an
#: ``<!-- only: form, form -->`` line the only forms (a term with an everyday sense, such as "tier").
GLOSSARY = DOCS / "glossary.md"

_LINK = re.compile(r"(?<!!)\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<target>[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)")
_CODE_SPAN = re.compile(r"(`+)(?P<code>.+?)\1", re.S)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9`(\[*\"])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.")
#: A commit hash: 7 to 40 hexadecimal digits with at least one letter and one digit, as a word of its own.
COMMIT_HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")
#: A test path: a file or folder of the test tree.
TEST_PATH = re.compile(r"(?<![\w./-])tests/[\w./]*|\btest_\w+\.py\b")


def user_pages(root: Path = REPO) -> list[Path]:
    """The pages a user reads to do something: the README, the site's front page and glossary, the tutorials and the
    how-to guides."""
    docs = root / "docs"
    pages = [root / "README.md", docs / "index.md", docs / "glossary.md"]
    for folder in ("tutorials", "how-to"):
        pages += sorted((docs / folder).glob("*.md"))
    return [p for p in pages if p.is_file()]


def explanation_pages(root: Path = REPO) -> list[Path]:
    """The explanation pages held to the same writing rules: all but the evidence pages (``verified.md``, and
    ``test-runs.md``, the suite's runs)."""
    evidence = {"verified.md", "test-runs.md"}
    return [p for p in sorted((root / "docs" / "explanation").glob("*.md")) if p.name not in evidence]


def contributor_pages(root: Path = REPO) -> list[Path]:
    """The pages a contributor reads, held to the same measure: the contributing guide's pages and ARCHITECTURE.md.
    They cite test paths and measured runs' commits, so :func:`forbidden` does not apply to them."""
    pages = sorted((root / "docs" / "contributing").glob("*.md")) + [root / "ARCHITECTURE.md"]
    return [p for p in pages if p.is_file()]


@dataclass
class Measure:
    """A page's prose, measured."""

    path: Path
    sentences: list[int] = field(default_factory=list)
    """Words per sentence."""
    paragraphs: list[int] = field(default_factory=list)
    """Words per paragraph."""
    longest_sentence: str = ""
    longest_paragraph: str = ""

    @property
    def average(self) -> float:
        return sum(self.sentences) / len(self.sentences) if self.sentences else 0.0

    def problems(self) -> list[str]:
        where = _where(self.path)
        out = []
        if self.average > MAX_AVERAGE:
            out.append(f"{where}: sentences average {self.average:.1f} words (at most {MAX_AVERAGE:g})")
        if self.sentences and max(self.sentences) > MAX_SENTENCE:
            out.append(
                f"{where}: a sentence of {max(self.sentences)} words (at most {MAX_SENTENCE}): "
                f"{self.longest_sentence[:200]!r}"
            )
        if self.paragraphs and max(self.paragraphs) > MAX_PARAGRAPH:
            out.append(
                f"{where}: a paragraph of {max(self.paragraphs)} words (at most {MAX_PARAGRAPH}): "
                f"{self.longest_paragraph[:200]!r}"
            )
        return out


def _where(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def _plain(text: str) -> str:
    """Markdown inline text as words: a link as its text, a code span as one word, emphasis marks dropped."""
    text = _LINK.sub(lambda m: m.group("text"), text)
    text = _CODE_SPAN.sub(lambda m: "CODE" if m.group("code").strip() else "", text)
    return re.sub(r"(\*\*|__|(?<!\w)[*_]|[*_](?!\w))", "", text)


def paragraphs(text: str) -> Iterator[str]:
    """The prose paragraphs of a Markdown text (list items one each; headings, tables, code and comments left out)."""
    current: list[str] = []
    for line in prose(text).splitlines() + [""]:
        stripped = line.strip()
        starts_item = bool(_ITEM.match(line))
        if not stripped or stripped.startswith(("#", "|")) or re.fullmatch(r"\(.*\)=", stripped):
            if current:
                yield " ".join(current)
            current = []
            continue
        if starts_item and current:
            yield " ".join(current)
            current = []
        current.append(_ITEM.sub("", stripped).lstrip("> ").strip())


def sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences."""
    parts = _SPLIT.split(_plain(paragraph))
    out: list[str] = []
    for part in parts:
        if out and out[-1].endswith(_ABBREVIATIONS):
            out[-1] += " " + part
        else:
            out.append(part)
    return [s for s in out if s.strip()]


def words(text: str) -> int:
    return len(text.split())


def measure(path: Path) -> Measure:
    m = Measure(path)
    for paragraph in paragraphs(path.read_text()):
        n = words(_plain(paragraph))
        m.paragraphs.append(n)
        if n >= max(m.paragraphs):
            m.longest_paragraph = paragraph
        for sentence in sentences(paragraph):
            m.sentences.append(words(sentence))
            if m.sentences[-1] >= max(m.sentences):
                m.longest_sentence = sentence
    return m


def forbidden(path: Path) -> list[str]:
    """Commit hashes and test paths in a page's prose, code and comments alike: ``path:line: what``."""
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        for pattern, what in ((COMMIT_HASH, "a commit hash"), (TEST_PATH, "a test path")):
            for m in pattern.finditer(line):
                out.append(f"{_where(path)}:{i}: {what} ({m.group(0)}) belongs on the evidence or "
                           "contributing page")  # fmt: skip
    return out


def readme_size(path: Path = REPO / "README.md") -> tuple[int, int]:
    """The README's lines and words (as ``wc -l`` and ``wc -w`` count them)."""
    text = path.read_text()
    return text.count("\n"), len(text.split())


# --- the glossary -------------------------------------------------------------------------------------------------


def glossary_terms(path: Path = GLOSSARY) -> dict[str, tuple[str, ...]]:
    """Each term's anchor in the glossary -> the forms a page may use it in (the term, its plural, and what its
    ``<!-- also: ... -->`` line adds)."""
    from stacks.docs.links import slug

    out: dict[str, tuple[str, ...]] = {}
    term = ""
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            term = line[3:].strip()
            out[slug(term)] = (term, term + "s")
        elif term and (m := re.match(r"<!-- (also|only): (.*) -->", line.strip())):
            forms = [f.strip() for f in m.group(2).split(",")]
            out[slug(term)] = tuple(dict.fromkeys(forms if m.group(1) == "only" else [*out[slug(term)], *forms]))
    return out


def _glossary_links(text: str, page: Path, glossary: Path) -> list[tuple[int, int, str]]:
    """``(start, end, anchor)`` of each link of ``text`` into the glossary."""
    out = []
    for m in _LINK.finditer(text):
        target = m.group("target")
        file_part, _, anchor = target.partition("#")
        if file_part and (page.parent / file_part).resolve() == glossary.resolve():
            out.append((m.start(), m.end(), anchor))
    return out


def _searchable(text: str) -> str:
    """A page with what a reader does not read as prose blanked (code, comments, headings, tables, link targets):
    positions are kept."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    text = prose(text)
    text = _CODE_SPAN.sub(blank, text)
    text = re.sub(r"^[ \t]*(#|\|).*$", blank, text, flags=re.M)
    return re.sub(r"\]\([^)]*\)", blank, text)


def unlinked_terms(
    page: Path, terms: Optional[dict[str, tuple[str, ...]]] = None, glossary: Path = GLOSSARY
) -> list[str]:
    """The glossary terms whose first use on ``page`` is not a link to the glossary (to the term, or to a longer term
    that contains it)."""
    terms = terms if terms is not None else glossary_terms(glossary)
    text = page.read_text()
    search = _searchable(text)
    links = _glossary_links(text, page, glossary)
    out = []
    for anchor, forms in terms.items():
        pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in forms) + r")(?![\w-])", re.I)
        first = pattern.search(search)
        if first is None:
            continue
        ok = any(
            start <= first.start() < end and (a == anchor or anchor.replace("-", " ") in a.replace("-", " "))
            for start, end, a in links
        )
        if not ok:
            line = text.count("\n", 0, first.start()) + 1
            out.append(
                f"{_where(page)}:{line}: the first {first.group(0)!r} is not a link to the glossary "
                f"(glossary.md#{anchor})"
            )
    return out
