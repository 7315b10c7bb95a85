"""Documentation generated from the code, so it cannot go stale, and the checks of the documentation's links.

Pages generated whole, under ``docs/reference/``: every configuration key (:mod:`stacks.docs.config_reference`, from
the config models), every command and option (:mod:`stacks.docs.commands`, from the argument parsers), every
component with its arguments and outputs (:mod:`stacks.docs.library`, from the TypedDicts and docstrings) and the
stack outputs (:mod:`stacks.docs.stack_outputs`). Tables generated inside hand-written pages, between
``<!-- generated: NAME ... -->`` and ``<!-- end: NAME -->`` (:data:`GENERATED`): the presets, the instance catalog,
the pinned versions (:mod:`stacks.docs.tables`), the launcher's exit codes (:mod:`stacks.docs.contract`). And
``Pulumi.yaml``'s ``config:`` schema, from the config models.

``python -m stacks docs`` (alias ``python -m stacks.docs``) rewrites them all; ``--check`` only reports the stale
ones; ``--reference`` prints the configuration reference (an installed package has no checkout to rewrite: there only
``--reference`` runs; the reference ships with it); ``--check-external`` checks every external link of the
documentation (it needs internet). ``tests/unit/test_docs.py`` keeps every generated file equal to the code, and
``tests/unit/test_docs_links.py`` every internal link and anchor pointing somewhere.
"""

from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from stacks.bundle import PREFIX, REFERENCE
from stacks.cli import EXIT_FAILED, EXIT_OK, CommandError, command, parser_for
from stacks.docs import contract, tables
from stacks.docs.config_reference import (
    allowed_text,
    config_index,
    configuration_reference,
    default_text,
    model_tables,
    project_config,
    section_entry,
    type_text,
)
from stacks.docs.markdown import BLOCK, REGENERATE, blocks
from stacks.stackfile import REPO

README = REPO / "README.md"
#: The Pulumi project file, whose ``config:`` block is generated.
PROJECT_FILE = REPO / "Pulumi.yaml"
#: The site's reference pages.
REFERENCE_PAGES = REPO / "docs" / "reference"


#: The generated blocks of the hand-written pages, by name: each renders its table from the code.
GENERATED: Mapping[str, Callable[[], str]] = {
    "presets": tables.presets_table,
    "dev-cost": tables.dev_cost,
    "preset-regions": tables.presets_regions_table,
    "preset-summaries": tables.preset_summaries,
    "instance-types": tables.instance_types_table,
    "instance-facts": tables.instance_facts_table,
    "kubernetes-versions": tables.kubernetes_versions_table,
    "charts": tables.charts_table,
    "images": tables.images_table,
    "manifests": tables.manifests_table,
    "addons": tables.addons_table,
    "addon-features": tables.addon_features_table,
    "image-builds": tables.image_build_table,
    "exit-codes": contract.exit_codes_table,
    "restart-keys": tables.restart_keys_table,
}


def readme_blocks(text: str) -> dict[str, str]:
    """The generated blocks of a page, by name (their body without the markers)."""
    return blocks(text)


def regenerate(text: str) -> str:
    """``text`` with every generated block rendered again."""
    return BLOCK.sub(lambda m: f"{m.group(1)}{GENERATED[m.group('name')]()}\n{m.group(4)}", text)


def _page(render: str) -> Callable[[str], str]:
    def whole(_current: str) -> str:
        from stacks.docs import commands, library, stack_outputs

        renderers = {
            "commands": commands.commands_reference,
            "components": library.components_reference,
            "outputs": stack_outputs.outputs_reference,
        }
        return renderers[render]()

    return whole


def with_project_config(text: str) -> str:
    """``Pulumi.yaml``'s text with its ``config:`` block (the last one) generated again."""
    head, sep, _ = text.partition("\nconfig:\n")
    if not sep:
        raise ValueError("Pulumi.yaml has no top-level config: block")
    return head + "\n" + project_config()


#: Each generated file, by its path in the repository: where it is and its text rendered from its current text.
FILES: Mapping[str, tuple[Path, Callable[[str], str]]] = {
    "README.md": (README, regenerate),
    "docs/reference/configuration.md": (REFERENCE, lambda _: configuration_reference()),
    "docs/reference/commands.md": (REFERENCE_PAGES / "commands.md", _page("commands")),
    "docs/reference/components.md": (REFERENCE_PAGES / "components.md", _page("components")),
    "docs/reference/outputs.md": (REFERENCE_PAGES / "outputs.md", _page("outputs")),
    "docs/reference/presets.md": (REFERENCE_PAGES / "presets.md", regenerate),
    "docs/reference/instance-types.md": (REFERENCE_PAGES / "instance-types.md", regenerate),
    "docs/reference/versions.md": (REFERENCE_PAGES / "versions.md", regenerate),
    "docs/reference/job-contract.md": (REFERENCE_PAGES / "job-contract.md", regenerate),
    "docs/tutorials/deploy-dev.md": (REPO / "docs" / "tutorials" / "deploy-dev.md", regenerate),
    "docs/how-to/upgrading.md": (REPO / "docs" / "how-to" / "upgrading.md", regenerate),
    "Pulumi.yaml": (PROJECT_FILE, with_project_config),
}


def stale_files() -> list[str]:
    """The generated files that differ from what the code renders."""
    stale = []
    for name, (path, render) in FILES.items():
        current = path.read_text() if path.is_file() else ""
        if render(current) != current:
            stale.append(name)
    return stale


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Rewrite the generated files (exit 0), or with ``--check`` report whether they are current (exit 1 if not)."""
    parser = parser_for(
        "docs",
        prog,
        "Rewrite the documentation generated from the code: "
        + ", ".join(FILES)
        + ". Exit 0; with --check, 1 when a file is stale; with --check-external, 1 when an external link is broken.",
    )
    parser.add_argument("--check", action="store_true", help="only report whether the files are current")
    parser.add_argument(
        "--reference",
        action="store_true",
        help=f"print the configuration reference (every key; the file {REFERENCE.relative_to(REFERENCE.parents[2])}) "
        "and change nothing",
    )
    parser.add_argument(
        "--check-external",
        action="store_true",
        help="check that every external link of the README and the site answers (needs internet; change nothing)",
    )
    args = parser.parse_args(argv)
    if args.reference:
        print(configuration_reference(), end="")
        return EXIT_OK
    if PREFIX:
        raise CommandError(
            f"{parser.prog} rewrites the generated files of a checkout of the repository; this is an "
            f"installed package, whose configuration reference is {REFERENCE} (print it with "
            f"{parser.prog} --reference)"
        )
    if args.check_external:
        from stacks.docs.links import broken_external_links, external_links

        broken = broken_external_links()
        print("\n".join(broken) if broken else f"every external link answers ({len(external_links())} addresses)")
        return EXIT_FAILED if broken else EXIT_OK
    if args.check:
        stale = stale_files()
        print(f"stale: {', '.join(stale)}; run {REGENERATE}" if stale else "the generated documentation is current")
        return EXIT_FAILED if stale else EXIT_OK
    for path, render in FILES.values():
        current = path.read_text() if path.is_file() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(current))
    return EXIT_OK


__all__ = [
    "FILES",
    "GENERATED",
    "README",
    "REGENERATE",
    "allowed_text",
    "config_index",
    "configuration_reference",
    "default_text",
    "main",
    "model_tables",
    "readme_blocks",
    "regenerate",
    "section_entry",
    "stale_files",
    "type_text",
]
