"""Sphinx configuration of gear's documentation site.

Build it with ``bash scripts/docs.sh`` (set-up included) or, in a ready
environment, ``sphinx-build -W --keep-going -b html docs docs/_build/html``.
"""
import os
import sys

import gear

project = "gear"
author = "the gear developers"
copyright = "2026, the gear developers"
release = version = gear.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "gallery", "reports/**/*.md", "examples", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "auto_examples/*.md5",
                    "auto_examples/*.json"]

# API reference: autodoc + numpydoc
autosummary_generate = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# user guide: the Markdown pages of docs/ (MyST)
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# gallery: the examples run at build time and their figures are embedded
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
}
os.environ.setdefault("MPLBACKEND", "Agg")

html_theme = "alabaster"
html_title = f"gear {release}"
html_theme_options = {"description": "Articulated rigid-body dynamics on Kim's Lie-group formulation",
                      "fixed_sidebar": True}
html_static_path = []
