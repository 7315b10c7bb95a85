"""The box's build (:mod:`stacks.box.build`) says how long a cold build takes before it starts, and a second run finds
the binaries where the first left them; its pins hold (:func:`~stacks.box.build.check_pins`). A stand-in ``go``
(``GO``) records its builds: nothing is compiled here."""

import os
import shutil
from pathlib import Path

import pytest

from stacks.box import build as box_build

FAKE_GO = """#!/usr/bin/env bash
# go env GOVERSION | go build ... -o OUT PACKAGE: an executable OUT, each build recorded
if [ "$1" = env ]; then echo go1.26.0; exit 0; fi
while [ "$#" -gt 0 ]; do
    if [ "$1" = -o ]; then printf '#!/bin/sh\\n' >"$2"; chmod +x "$2"; echo "$2" >>"$BUILDS"; fi
    shift
done
"""


def test_every_command_has_its_cold_build_time() -> None:
    assert {f: set(m.commands) for f, m in box_build.MODULES.items()} == {
        f: set(times) for f, times in box_build.COLD_BUILD_S.items()
    }
    assert all(s > 0 for times in box_build.COLD_BUILD_S.values() for s in times.values())


def test_a_cold_build_says_how_long_it_takes_before_it_starts_and_a_second_run_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    builds = tmp_path / "builds"
    monkeypatch.setenv("BUILDS", str(builds))
    monkeypatch.setenv("EKS_TRAINING_BOX_CACHE", str(tmp_path / "cache"))
    lines: list[str] = []
    paths = box_build.build(["helm", "kueue"], go=str(go), log=lines.append)
    assert lines[0].startswith("building the box's binaries (helm, kueue) into ")
    expected = box_build.COLD_BUILD_S["helm"]["helm"] + box_build.COLD_BUILD_S["kueue"]["kueue"]
    assert f"about {-(-expected // 60)} min" in lines[0] and "helm ~" in lines[0] and "kueue ~" in lines[0]
    assert [line.split(" (")[0] for line in lines[1:] if line.startswith("building ")] == [
        "building helm",
        "building kueue",
    ]
    assert len(builds.read_text().splitlines()) == 2
    assert all(p.is_file() and os.access(p, os.X_OK) for p in paths.values())

    lines.clear()
    assert box_build.build(["helm", "kueue"], go=str(go), log=lines.append) == paths
    assert lines == [] and len(builds.read_text().splitlines()) == 2  # found in the cache: nothing said, nothing built


def test_the_pins_hold_and_a_previous_kueue_not_older_than_the_current_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box_build.check_pins()
    for folder in box_build.MODULES:
        (tmp_path / folder).mkdir()
        shutil.copy(box_build.BOX / folder / "go.mod", tmp_path / folder / "go.mod")
    current = box_build.MODULES["kueue"].version()
    previous = tmp_path / "kueue-previous" / "go.mod"
    previous.write_text(previous.read_text().replace(box_build.MODULES["kueue-previous"].version(), current))
    monkeypatch.setattr(box_build, "MODULES_DIR", tmp_path)
    with pytest.raises(
        box_build.BoxBuildError, match=f"kueue-previous/go.mod pins sigs.k8s.io/kueue {current}, not older"
    ):
        box_build.check_pins()
