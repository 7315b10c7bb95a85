"""Python source parsed for the tests that read the tree's code (imports, layering, kinds' branches)."""

from stacks.docs.source import class_source, component_analysis, parse

__all__ = ["class_source", "component_analysis", "parse"]
