"""``python -m stacks.rehearse``: an alias of ``python -m stacks rehearse`` (:mod:`stacks.box.rehearse_cli`)."""

if __name__ == "__main__":
    from stacks.cli import alias

    alias("rehearse")
