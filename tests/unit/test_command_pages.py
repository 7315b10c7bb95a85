"""The guides' runnable shell blocks, read without running them (they run in tests/real/test_docs_commands_real.py
and tests/cluster/test_box_docs_commands.py): a docs change that drops one fails the fast tiers."""

from tests.command_pages import box_blocks, offline_blocks

BLOCKS = offline_blocks()


def test_there_are_offline_blocks_to_run() -> None:
    assert len(BLOCKS) >= 6, BLOCKS


def test_the_guide_has_the_box_commands() -> None:
    text = "".join(block for _, block in box_blocks())
    for command in ("box build", "box up", "box down", "box bench", "rehearse --stack dev", "--exit-code", "--keep"):
        assert f"python -m stacks {command}" in text or command in text, command
    assert len(box_blocks()) >= 6
