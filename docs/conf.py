"""The documentation site: Sphinx with MyST (the pages are Markdown, readable on GitHub as they are), the furo theme and
Mermaid pictures. Built by ``.ci/run`` with warnings as errors, offline:

    .venv-docs/bin/python -m sphinx -W --keep-going -n -q -b html docs docs/_build/html

(``.venv-docs`` holds ``requirements-docs.txt``). The reference pages are generated from the code by
``python -m stacks docs``; this build only renders them."""

project = "eks-training"
author = "the eks-training authors"
copyright = "the eks-training authors, Apache License 2.0"
language = "en"

extensions = ["myst_parser", "sphinxcontrib.mermaid"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]

# Markdown as GitHub renders it: heading anchors with GitHub's slugs (links between pages name them), ```mermaid fences
# as pictures, $ not taken for maths.
myst_heading_anchors = 6
myst_heading_slug_func = "github"
myst_fence_as_directive = ["mermaid"]
myst_enable_extensions = ["colon_fence"]

# The pictures are drawn in the reader's browser by mermaid.js (the build itself fetches nothing).
mermaid_output_format = "raw"

html_theme = "furo"
html_title = "eks-training"
html_show_sourcelink = False
nitpicky = True
