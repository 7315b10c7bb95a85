"""The own-job tutorial's page: its examples, their captions and its commands, read without running them (they run
in tests/real/test_guide_real.py)."""

import re

from tests.guide_page import EXAMPLES, FOR_EACH, PAGE, SETUP


def test_the_guide_has_an_example_of_each_kind() -> None:
    assert set(EXAMPLES) == {"pytorch", "command", "mpi"}
    for name, entry in EXAMPLES.items():
        assert entry["run"] and entry["files"], name
    assert FOR_EACH == [*SETUP, "python -m stacks plan --stack mine"]


def test_each_file_names_itself_where_the_reader_sees_it() -> None:
    """The page's HTML comments are hidden on the site: each file's name shows in a caption just before it."""
    text = PAGE.read_text()
    marks = re.findall(r"<!-- example [\w-]+: file (\S+) -->", text)
    captioned = re.findall(r"Save as `(\S+)`:\n\n<!-- example [\w-]+: file (\S+) -->", text)
    assert len(marks) == 6 and captioned == [(path, path) for path in marks]
