"""What a Dockerfile of this repository says, read without building it: its instructions, the environment its
``ENV`` lines give a container, the CUDA targets its compilations build for, and where its Open MPI is.

The plan reads the images' facts from here once (``ImagePlan``: the Open MPI prefix an MPI job's launcher needs,
the GPUs the image's CUDA code runs on), and ``tests/unit/test_image_rules.py`` checks every Dockerfile of the
repository with the same functions; the config rules read a user's own Dockerfile with them too. The syntax read:
the default escape character, heredocs (kept with their instruction), ``$VAR`` and ``${VAR}`` substitution
(https://docs.docker.com/reference/dockerfile/#environment-replacement).
"""

import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from components.catalog.gpus import CudaTarget
from components.image.context import glob_regex

#: The environment a container starts with when no image sets one: Docker's default ``PATH``
#: (https://docs.docker.com/reference/dockerfile/#env, the ``PATH`` every Linux image gets from the engine).
DEFAULT_ENV: Mapping[str, str] = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_GENCODE = re.compile(r"-gencode[= ]arch=compute_(\d+)([a-z]?),code=\[?([a-z0-9_,]+)\]?")


#: A word that starts a heredoc in ``RUN``, ``COPY`` or ``ADD`` (``<<EOF``, ``<<-EOF``, ``<<"EOF"``), as BuildKit's
#: parser reads it (https://github.com/moby/buildkit, ``frontend/dockerfile/parser/parser.go``, ``reHeredoc``).
_HEREDOC = re.compile(r"^(\d*)<<(-?)\s*([^<]*)$")


def _heredocs(line: str) -> list[tuple[bool, str]]:
    """The heredocs an instruction's line opens: (leading tabs stripped, terminator), in order."""
    word = line.partition(" ")[0].upper()
    if word not in ("RUN", "COPY", "ADD") or "<<" not in line:
        return []
    try:
        words = shlex.split(line, posix=False)
    except ValueError:
        words = line.split()
    out = []
    for w in words:
        m = _HEREDOC.match(w)
        if m and m.group(3):
            out.append((m.group(2) == "-", m.group(3).strip("\"'")))
    return out


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions as ``(INSTRUCTION, arguments)``, continuation lines joined, comments and blank
    lines dropped; a heredoc's lines are part of its instruction's arguments (one per line), never instructions."""
    out: list[tuple[str, str]] = []
    pending = ""
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and (not line or line.startswith("#")):
            continue  # a comment or an empty line inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        for strip, end in _heredocs(full):
            for body in lines:
                if (body.lstrip("\t") if strip else body) == end:
                    break
                full += "\n" + body
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def substitute(value: str, env: Mapping[str, str]) -> str:
    """``$VAR`` and ``${VAR}`` replaced by their values in ``env`` (an unset variable is empty, as Docker does)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


@dataclass(frozen=True)
class Copy:
    """One ``COPY`` or ``ADD`` of files of the build context: its sources (relative to the context) and where they go
    (an absolute path; ``dest_is_dir`` when the files go into it)."""

    sources: tuple[str, ...]
    dest: str
    dest_is_dir: bool

    def place(self, name: str) -> Optional[str]:
        """Where the context's file ``name`` (a ``/`` path relative to the context) lands in the image, or ``None``
        when this instruction does not copy it (a source is the file, a pattern matching it, or a folder holding it:
        https://docs.docker.com/reference/dockerfile/#copy)."""
        for source in self.sources:
            src = posixpath.normpath(source).lstrip("/") or "."  # a source is inside the context, whatever its "/"
            if src == ".":
                return posixpath.join(self.dest, name)
            if name.startswith(src + "/"):
                return posixpath.join(self.dest, posixpath.relpath(name, src))
            if glob_regex(src, doublestar=False).match(name):  # Go's filepath.Match, as the build matches
                return posixpath.join(self.dest, posixpath.basename(name)) if self.dest_is_dir else self.dest
        return None


def _copy_words(args: str) -> list[str]:
    """The words of a ``COPY``/``ADD``: its ``--options``, then the JSON form (``["src", "dest"]``) or the shell form,
    quotes removed."""
    options = []
    rest = args.strip()
    while rest.startswith("--"):
        option, _, rest = rest.partition(" ")
        options.append(option)
        rest = rest.strip()
    if rest.startswith("["):
        try:
            words = json.loads(rest)
        except ValueError:
            words = None
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return options + words
    try:
        return options + shlex.split(rest, posix=True)
    except ValueError:
        return options + rest.split()


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'" else word


def _parents(folder: str) -> set[str]:
    """``folder`` and every folder above it."""
    out = {folder}
    while folder not in ("/", ""):
        folder = posixpath.dirname(folder)
        out.add(folder)
    return out


def _pairs(args: str) -> list[tuple[str, str]]:
    """The ``KEY=value`` pairs of an ``ENV`` or ``ARG`` instruction (``ENV KEY value``: one pair)."""
    words = shlex.split(args, posix=True)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) if "=" in w else (w, "") for w in words]  # type: ignore[misc]


@dataclass(frozen=True)
class Dockerfile:
    """One Dockerfile and what it declares."""

    path: Path
    text: str

    @staticmethod
    def read(path: Path) -> "Dockerfile":
        return Dockerfile(path, path.read_text())

    @property
    def instructions(self) -> list[tuple[str, str]]:
        return instructions(self.text)

    def copies(self) -> list[Copy]:
        """The final stage's ``COPY`` and ``ADD`` instructions of files of the build context, in order: those of an
        earlier stage, ``--from`` another stage or image, and ``ADD`` of a URL put nothing of the context in the
        image; a stage built on an earlier stage starts with that stage's. Relative destinations follow the stage's
        ``WORKDIR`` (from ``/``: the base image's own is not read); ``ARG`` and ``ENV`` values are substituted, as
        the build does."""
        stages: dict[str, tuple[list[Copy], str, dict[str, str], set[str]]] = {}
        global_args = self._global_args()
        out: list[Copy] = []
        workdir, scope, folders, name = "/", dict[str, str](), {"/"}, ""
        for word, args in self.instructions:
            if word == "FROM":  # a stage built on an earlier one starts from its files, WORKDIR and variables
                if name:
                    stages[name] = (out, workdir, scope, folders)
                parts = [p for p in args.split() if not p.startswith("--")]
                parent = stages.get(parts[0].lower()) if parts else None
                out, workdir, scope, folders = (
                    (list(parent[0]), parent[1], dict(parent[2]), set(parent[3])) if parent else ([], "/", {}, {"/"})
                )
                name = parts[2].lower() if len(parts) >= 3 and parts[1].upper() == "AS" else ""
                continue
            if word in ("ARG", "ENV"):
                before = dict(scope)
                for k, v in _pairs(args):
                    if word == "ARG" and not v:
                        scope.setdefault(k, global_args.get(k, ""))  # a global ARG's default, redeclared
                    else:
                        scope[k] = substitute(v, before)
            elif word == "WORKDIR":
                workdir = posixpath.join(workdir, substitute(_unquote(args.strip()), scope))
                folders.update(_parents(workdir))
            elif word in ("COPY", "ADD"):
                line = args.split("\n", 1)[0]  # a heredoc's body is a file's content, not words
                words = [substitute(w, scope) for w in _copy_words(line) if not w.startswith("<<")]
                options = [w for w in words if w.startswith("--")]
                *sources, dest = [w for w in words if not w.startswith("--")] or [""]
                if any(o.startswith("--from") for o in options):
                    continue
                sources = [s for s in sources if not re.match(r"^[a-z][a-z0-9+.-]*://|^git@", s)]
                if sources:
                    to = posixpath.normpath(posixpath.join(workdir, dest))
                    many = len(sources) > 1 or any(c in s for s in sources for c in "*?[")
                    # a folder: so named, or one that exists (a file copied onto a folder goes into it)
                    into = dest.endswith("/") or many or dest in (".", "./") or to in folders
                    out.append(Copy(tuple(sources), to, into))
                    if into:
                        folders.update(_parents(to))
        return out

    def _global_args(self) -> dict[str, str]:
        """The ``ARG`` defaults declared before the first ``FROM``."""
        args: dict[str, str] = {}
        for word, rest in self.instructions:
            if word == "FROM":
                break
            if word == "ARG":
                for k, v in _pairs(rest):
                    args[k] = substitute(v, args)
        return args

    def env(self, base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """The environment of a container of the final stage: ``base`` (the base image's, default
        :data:`DEFAULT_ENV`) with every ``ENV`` of the last stage applied in order, each instruction's values
        substituted against the environment before it (Docker's rule for one instruction)."""
        env = dict(DEFAULT_ENV if base is None else base)
        for word, args in self.instructions:
            if word == "FROM":
                env = dict(DEFAULT_ENV if base is None else base)
            elif word == "ENV":
                before = dict(env)
                for k, v in _pairs(args):
                    env[k] = substitute(v, before)
        return env

    def final_base(self) -> Optional[str]:
        """The image the final stage builds on, as its ``FROM`` names it (options skipped; the ``ARG`` defaults
        declared before the first ``FROM`` substituted, as the build does without ``--build-arg``; a stage built on an
        earlier stage followed back to the image that stage pulls), or ``None`` (``scratch``, or a reference made of
        an argument without a default)."""
        stages: dict[str, Optional[str]] = {}
        base: Optional[str] = None
        global_args: dict[str, str] = {}
        seen_from = False
        for word, args in self.instructions:
            if word == "ARG" and not seen_from:
                for k, v in _pairs(args):
                    if v:
                        global_args[k] = substitute(v, global_args)
            if word != "FROM":
                continue
            seen_from = True
            parts = [p for p in args.split() if not p.startswith("--")]
            used = [m.group(1) or m.group(2) for m in _VAR.finditer(parts[0])]
            ref = "$" if any(n not in global_args for n in used) else substitute(parts[0], global_args)
            if ref.lower() in stages:
                base = stages[ref.lower()]
            else:
                base = None if ref.lower() == "scratch" or "$" in ref else ref
            if len(parts) >= 3 and parts[1].upper() == "AS":
                stages[parts[2].lower()] = base
        return base

    def build_args(self) -> dict[str, str]:
        """``ARG`` defaults (substituted in order)."""
        args: dict[str, str] = {}
        for word, rest in self.instructions:
            if word == "ARG":
                for k, v in _pairs(rest):
                    args[k] = substitute(v, args)
        return args

    def cuda_compilations(self) -> list[tuple[str, frozenset[CudaTarget]]]:
        """Every ``RUN`` that compiles CUDA code (runs ``nvcc`` or passes ``NVCC_GENCODE``), with the ``-gencode``
        targets it builds for (build arguments and environment substituted). A compilation without explicit
        targets gets an empty set: its targets are whatever the tool defaults to, which no rule can check."""
        out: list[tuple[str, frozenset[CudaTarget]]] = []
        scope: dict[str, str] = {}
        for word, rest in self.instructions:
            if word in ("ARG", "ENV"):
                before = dict(scope)
                for k, v in _pairs(rest):
                    scope[k] = substitute(v, before)
            elif word == "RUN" and re.search(r"\bnvcc\b|NVCC_GENCODE=", rest):
                text = substitute(rest, scope)
                targets: set[CudaTarget] = set()
                for arch, suffix, codes in _GENCODE.findall(text):
                    for code in codes.split(","):
                        m = re.fullmatch(r"(sm|compute)_(\d+)([a-z]?)", code)
                        if m:
                            digits = m.group(2)
                            targets.add(CudaTarget(m.group(1), (int(digits[:-1]), int(digits[-1])), bool(m.group(3))))
                out.append((rest, frozenset(targets)))
        return out

    def mpi_prefix(self) -> Optional[str]:
        """The Open MPI installation the image declares with ``ENV OPAL_PREFIX`` (Open MPI's own variable for where
        it is installed, https://docs.open-mpi.org/en/v5.0.x/installing-open-mpi/installation-location.html), or
        ``None``."""
        return self.env().get("OPAL_PREFIX") or None


def read_dockerfile(context: Path, dockerfile: str = "Dockerfile") -> Dockerfile:
    """The Dockerfile ``dockerfile`` of the build context ``context``."""
    return Dockerfile.read(context / dockerfile)


_APT_LISTS = re.compile(r"\brm\s+(-\w+\s+)*/var/lib/apt/lists\b")
_APT_UPDATE = re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*update\b")
_APT_INSTALL = re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*(?:install|upgrade|dist-upgrade|build-dep)\b")


def package_index_problems(dockerfile: Dockerfile, installers: Mapping[str, str]) -> list[str]:
    """Steps that install packages without a package index: ``apt-get install`` (or an installer of
    ``installers``, which calls it) after the lists were removed, or before any ``apt-get update`` in the stage
    (a base image ships without lists). The shell commands of each ``RUN`` are followed in order."""
    problems: list[str] = []
    present = False
    for word, args in dockerfile.instructions:
        if word == "FROM":
            present = False
        if word != "RUN":
            continue
        for command in re.split(r"&&|\|\||;", args):
            if _APT_UPDATE.search(command):
                present = True
            elif _APT_LISTS.search(command):
                present = False
            elif not present:
                what = (
                    "apt-get install"
                    if _APT_INSTALL.search(command)
                    else next(
                        (name for name in installers if re.search(rf"(^|[\s/]){re.escape(name)}\b", command)), None
                    )
                )
                if what:
                    problems.append(
                        f"{dockerfile.path}: `{command.strip()}` runs {what} without a package index "
                        "(run apt-get update first in the same RUN, and remove /var/lib/apt/lists after it)"
                    )
    return problems
