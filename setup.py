"""Packaging beyond pyproject.toml: the installed package has one import name of its own, ``eks_training``.

Installed as ``components`` and ``stacks``, the repository's packages would collide with a user's own folders of
those names. So everything installs under ``eks_training/``, laid out like the repository: the packages, with every
module rewritten by :func:`rewrite` (:mod:`ast` and :mod:`tokenize`, not a pattern) so each own import, dotted
module name and ``-m stacks...`` is ``eks_training.<name>``; the images' build folders and ``box/``
(:mod:`stacks.bundle` finds them); ``docs/reference/configuration.md``; the packages' other files; and the program
``__main__.py``. A module that still imports an own name fails the build; an editable install is refused. What is
rewritten, and why this over relative imports or an import hook: docs/explanation/packaging.md."""

from __future__ import annotations

import ast
import gc
import io
import re
import shutil
import tokenize
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

#: The installed package's one import name.
PACKAGE = "eks_training"
#: The repository's packages, installed as ``eks_training.<name>``.
OWN = ("components", "stacks")
#: The folders shipped as they are, beside the packages (relative to the repository, patterns setuptools globs).
SHIPPED = (
    "training/*",
    "training/.dockerignore",
    "images/*/*",
    "images/*/.dockerignore",
    "box/*/go.mod",
    "box/*/go.sum",
    "box/*/*.go",
    "docs/reference/configuration.md",
)
HERE = Path(__file__).resolve().parent

# within any string: a module to run (-m), an import in an example
_PROSE = re.compile(
    rf"(?P<lead>(?<![\w.-])-m\s+|\bfrom\s+|\bimport\s+)(?P<name>(?:{'|'.join(OWN)})\b)"
    r"(?P<rest>(?:\.\w+)*)(?P<tail>\s+import\b)?"
)
_STRING_START = re.compile(r"(?P<prefix>[rRbBuUfF]*)(?P<quote>'''|\"\"\"|'|\")")


class RewriteError(Exception):
    """A module imports an own name the rewrite cannot give its installed name."""


def own_modules(root: Path = HERE) -> frozenset[str]:
    """Every dotted name of a module or package of :data:`OWN` (``stacks``, ``stacks.plan``, ``stacks.plan.report``)."""
    names = set()
    for top in OWN:
        for path in (root / top).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


def _rewrite_string(text: str, modules: frozenset[str]) -> str:
    m = _STRING_START.match(text)
    if m is None or "b" in m["prefix"].lower():
        return text
    if "f" not in m["prefix"].lower():
        value = ast.literal_eval(text)
        if value in modules and "." in value and text[m.end() :].startswith(value):
            return text[: m.end()] + f"{PACKAGE}." + text[m.end() :]

    return rewrite_prose(text)


def rewrite_prose(text: str) -> str:
    """``text`` with each module it runs (``-m stacks...``) or imports in an example (``from stacks... import``,
    ``import stacks.``) under its installed name."""

    def prose(p: re.Match[str]) -> str:
        if (p["lead"].startswith("from") and not p["tail"]) or (p["lead"].startswith("import") and not p["rest"]):
            return p[0]  # English ("values from stacks", "import stacks'"), not an import
        return f"{p['lead']}{PACKAGE}.{p['name']}{p['rest']}{p['tail'] or ''}"

    return _PROSE.sub(prose, text)


def _parse(source: str) -> ast.Module:
    """``ast.parse`` with the collector off: a collection that builds a tree meanwhile (a finalizer that logs a
    traceback) breaks this one on CPython 3.11 (https://github.com/python/cpython/issues/106905). The tests call
    :func:`rewrite` in their own processes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if enabled:
            gc.enable()


def rewrite(source: str, modules: frozenset[str], where: str = "<module>") -> str:
    """``source`` with every name it gives an own module prefixed with ``eks_training.``
    (docs/explanation/packaging.md)."""
    tree = _parse(source)
    lines = source.splitlines(keepends=True)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    at = {tok.start: i for i, tok in enumerate(tokens)}

    def pos(row: int, byte_col: int) -> tuple[int, int]:  # ast counts UTF-8 bytes, tokenize characters
        return row, len(lines[row - 1].encode()[:byte_col].decode())

    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            binds = []
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in OWN:
                    start = pos(alias.lineno, alias.col_offset)
                    edits.append((start, start, f"{PACKAGE}."))
                    if alias.asname is None:
                        binds.append(top)
            if binds:
                assert node.end_lineno is not None and node.end_col_offset is not None
                end = pos(node.end_lineno, node.end_col_offset)
                edits.append((end, end, "".join(f"; from {PACKAGE} import {t}" for t in dict.fromkeys(binds))))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in OWN:
            i = at[pos(node.lineno, node.col_offset)]  # the `from` keyword
            module = next(t for t in tokens[i + 1 :] if t.type == tokenize.NAME)
            edits.append((module.start, module.start, f"{PACKAGE}."))
    for tok in tokens:
        if tok.type == tokenize.STRING:
            new = _rewrite_string(tok.string, modules)
            if new != tok.string:
                edits.append((tok.start, tok.end, new))
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out = source
    for (srow, scol), (erow, ecol), text in sorted(edits, reverse=True):
        out = out[: offsets[srow - 1] + scol] + text + out[offsets[erow - 1] + ecol :]
    for stmt in ast.walk(_parse(out)):
        names = (
            [a.name for a in stmt.names]
            if isinstance(stmt, ast.Import)
            else [stmt.module or ""]
            if isinstance(stmt, ast.ImportFrom) and stmt.level == 0
            else []
        )
        for name in names:
            if name.split(".")[0] in OWN:
                raise RewriteError(f"{where}:{getattr(stmt, 'lineno', 0)}: still imports {name} after the rewrite")
    return out


class BuildPy(build_py):
    """Installs :data:`OWN` as ``eks_training.<name>``, each module rewritten (:func:`rewrite`), with the shipped
    folders beside them and a generated ``eks_training/__init__.py``."""

    def run(self) -> None:
        # a build folder of an earlier layout (top-level components/, stacks/) would ship with the wheel
        for stale in (PACKAGE, *OWN):
            shutil.rmtree(Path(self.build_lib) / stale, ignore_errors=True)
        self._modules = own_modules()
        super().run()
        # the reference is generated from the modules, whose commands it names: the installed ones
        reference = Path(self.build_lib) / PACKAGE / "docs" / "reference" / "configuration.md"
        reference.write_text(rewrite_prose(reference.read_text()))
        init = Path(self.build_lib) / PACKAGE / "__init__.py"
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text(
            f'"""eks-training: the components ({PACKAGE}.components) and the program and its tools '
            f'({PACKAGE}.stacks), installed under one name."""\n'
        )
        # the modules are annotated: a type checker reads them in a project that imports them (PEP 561)
        (init.parent / "py.typed").write_text("")

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        if package == PACKAGE:  # of the repository's root modules, the program (stacks.mocked runs it); not setup.py
            return [(PACKAGE, "__main__", str(Path(package_dir) / "__main__.py"))]
        return super().find_package_modules(package, package_dir)

    def check_package(self, package: str, package_dir: str) -> str | None:
        if package == PACKAGE:
            return None  # its __init__.py is generated
        return super().check_package(package, package_dir)

    def build_module(self, module: str, module_file: str, package: str | list[str]) -> tuple[str, bool]:
        parts = package.split(".") if isinstance(package, str) else list(package)
        outfile = Path(self.get_module_outfile(self.build_lib, parts, module))
        outfile.parent.mkdir(parents=True, exist_ok=True)
        outfile.write_text(rewrite(Path(module_file).read_text(), self._modules, module_file))
        return str(outfile), True


class RefuseEditable(editable_wheel):
    """``pip install -e``: refused (setuptools would map ``eks_training`` onto the repository, whose modules import
    ``components`` and ``stacks``: the first import would fail, far from the cause)."""

    def run(self) -> None:
        raise RewriteError(
            "eks-training cannot be installed in editable mode (pip install -e): its installed modules "
            "are rewritten copies, under the import name eks_training (setup.py). Work in the checkout "
            "itself (python -m stacks ... from its folder), or install it: pip install PATH"
        )


def _package_data(root: Path = HERE) -> dict[str, list[str]]:
    """The shipped folders, and every file of the packages that is not a module (``stacks/box/stages.yaml``)."""
    data = {PACKAGE: list(SHIPPED)}
    for top in OWN:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts:
                package = ".".join((PACKAGE, *path.parent.relative_to(root).parts))
                data.setdefault(package, []).append(path.name)
    return data


def _packages(root: Path = HERE) -> list[str]:
    return [
        PACKAGE,
        *sorted(
            f"{PACKAGE}.{name}"
            for name in own_modules(root)
            if (root / name.replace(".", "/") / "__init__.py").is_file()
        ),
    ]


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it for rewrite()
    setup(
        packages=_packages(),
        package_dir={PACKAGE: ".", **{f"{PACKAGE}.{top}": top for top in OWN}},
        package_data=_package_data(),
        include_package_data=False,  # exactly what package_data names (the shipped folders are no packages)
        exclude_package_data={"": ["__pycache__/*", "*.pyc"]},
        cmdclass={"build_py": BuildPy, "editable_wheel": RefuseEditable},
    )
