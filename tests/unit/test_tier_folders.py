"""Which tier folders a ``-m`` expression collects at all (tests/conftest.py ``tier_selectable`` and
``pytest_ignore_collect``): a folder is left out only when no test in it could be selected, whatever other markers
(``alone``, a user's own) its tests carry."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import TESTS, TIERS, pytest_ignore_collect, tier_selectable


@pytest.mark.parametrize(
    ("markexpr", "selectable"),
    [
        ("unit or mock", {"unit", "mock"}),
        ("moto or real", {"moto", "real"}),
        ("cluster", {"cluster"}),
        ("not cluster", {"unit", "mock", "moto", "real"}),
        # alone is a marker any tier's test may carry: every folder may hold one
        ("alone", set(TIERS)),
        ("real and not alone", {"real"}),
        ("(unit or real) and alone", {"unit", "real"}),
        ("not (unit or mock)", {"moto", "real", "cluster"}),
        ("unit and mock", set()),
        # a marker with arguments: pytest's own matching, never second-guessed
        ("slow(level=2)", set(TIERS)),
    ],
)
def test_a_folder_is_selectable_when_some_test_in_it_could_match(markexpr: str, selectable: set[str]) -> None:
    assert {tier for tier in TIERS if tier_selectable(markexpr, tier)} == selectable


def _config(markexpr: str) -> SimpleNamespace:
    return SimpleNamespace(getoption=lambda name, default=None: markexpr if name == "markexpr" else default)


def test_only_a_tier_folder_under_tests_is_ever_left_out(tmp_path: Path) -> None:
    config = _config("unit or mock")
    assert pytest_ignore_collect(TESTS / "real", config) is True  # type: ignore[arg-type]
    assert pytest_ignore_collect(TESTS / "mock", config) is None  # type: ignore[arg-type]
    # a module, a support folder, a folder named like a tier elsewhere: pytest decides
    assert pytest_ignore_collect(TESTS / "real" / "test_jobs_real.py", config) is None  # type: ignore[arg-type]
    assert pytest_ignore_collect(TESTS / "programs", config) is None  # type: ignore[arg-type]
    (tmp_path / "real").mkdir()
    assert pytest_ignore_collect(tmp_path / "real", config) is None  # type: ignore[arg-type]
    # no -m: every folder
    assert pytest_ignore_collect(TESTS / "cluster", _config("")) is None  # type: ignore[arg-type]


def test_a_test_module_that_imports_training_code_puts_training_on_the_path_first() -> None:
    """``training/``'s modules import their siblings as top-level modules (as in the image), so a test imports them
    with ``training/`` on ``sys.path``. A module must put it there itself (or import ``tests.training_support``, which
    does) before such an import: that another module of the run did it first holds in the full tier, not when the
    module or one of its tests runs alone (three real-tier modules failed to import then)."""
    import ast

    training = {p.stem for p in (TESTS.parent / "training").glob("*.py")}
    wrong = []
    for path in sorted(TESTS.rglob("*.py")):
        source = path.read_text()
        if "import" not in source:
            continue
        lines = source.splitlines()
        on_path = False
        for node in ast.parse(source).body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
                on_path = on_path or any(alias.name == "tests.training_support" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
                on_path = on_path or (node.module == "tests" and any(a.name == "training_support" for a in node.names))
            elif isinstance(node, (ast.For, ast.If, ast.Expr)):
                text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                on_path = on_path or ("sys.path.insert" in text and "training" in text.lower())
            if not on_path and any(name in training for name in names):
                wrong.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}")
    assert not wrong, wrong
