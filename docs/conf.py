"""Sphinx configuration of Conch's docs site: MyST Markdown, the PyData theme.

`python3 dev.py docs` builds it strict (a warning fails) into docs/_build/html, and
tests/unit/test_docs.py builds it in the suite, so a link into a page or a heading that is
gone, or a picture that is missing, fails the build.
"""

from __future__ import annotations

project = "Conch for Jupyter"
author = "Conch for Jupyter developers"
copyright = "Conch for Jupyter developers"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "shots.py", "__pycache__"]

# Links to a heading (`security.md#8-coding-agents-over-acp`) resolve, with GitHub's anchors, so
# the same link works on GitHub and here; one to a heading that is gone is a warning.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# A link to a page or a heading that does not exist warns (so -W fails the build).
nitpicky = True

html_theme = "pydata_sphinx_theme"
html_title = "Conch for Jupyter"
html_static_path = ["_static"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
}
