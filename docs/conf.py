"""Sphinx configuration of gear's documentation site.

Build it with ``bash scripts/docs.sh`` (set-up included) or, in a ready
environment, ``sphinx-build -W --keep-going -b html docs docs/_build/html``.
"""
import os
import re
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
html_static_path = ["_static"]
html_css_files = ["gear.css"]       # wide tables scroll inside the page column


# -- viewcode and compiled modules --------------------------------------------
# viewcode follows every documented object to the module that defines it.
# ``gear.constraints.ConstraintResult`` is defined in a compiled extension
# (``gear._closed``), which has no Python source: viewcode lists such a
# module in ``_modules/index.html`` but renders no page for it (a broken
# link).  The source of each extension ``gear._<area>`` is its Cython file,
# ``gear/_<area>.pyx``; give it to viewcode, with the tags (name -> kind,
# first line, last line) of its top-level classes and functions and of the
# classes' methods.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEF = re.compile(r"^[ ]*(?:cdef\s+)?(?P<kind>class|def)\s+(?P<name>\w+)\s*[(:]")


def _pyx_tags(code):
    """viewcode tags of a Cython source: its top-level ``class``, ``cdef
    class`` and ``def`` (the names Python sees) and the ``def`` methods of
    its classes (``Class.method``)."""
    lines = code.splitlines()
    tags, open_ = {}, []          # open_: [(name, kind, start, indent)]

    def close(upto, indent):
        while open_ and open_[-1][3] >= indent:
            name, kind, start, _ = open_.pop()
            end = upto
            while end > start and not lines[end - 1].strip():
                end -= 1
            tags[name] = (kind, start, end)

    for i, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        close(i - 1, indent)
        m = _DEF.match(line)
        if m and indent in (0, 4) and not (indent == 4 and not open_):
            name = m["name"] if indent == 0 else f"{open_[-1][0]}.{m['name']}"
            open_.append((name, m["kind"], i, indent))
    close(len(lines), 0)
    return tags


def _find_source(app, modname):
    if not modname.startswith("gear._"):
        return None
    path = os.path.join(_ROOT, *modname.split(".")) + ".pyx"
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        code = fh.read()
    return code, _pyx_tags(code)


# -- checks run after every build ---------------------------------------------
# With -W these warnings fail the build: a link to a file of the site that
# does not exist, and a public name (a documented module's ``__all__``) that
# the API reference does not describe.
_API_MODULES = ["gear", "gear.model", "gear.parsers", "gear.spatial", "gear.joints", "gear.algorithms",
                "gear.sensitivity", "gear.constraints", "gear.solvers", "gear.solvers.kkt",
                "gear.solvers.projection", "gear.solvers.soft", "gear.solvers.maximal",
                "gear.maximal", "gear.mechanisms", "gear.analysis", "gear.simulation",
                "gear.controllers", "gear.campaign", "gear.comparison", "gear.interop",
                "gear.testing", "gear.cli"]


def _same(documented, name, obj):
    """Whether the API reference's ``documented`` (``module.name``) is ``obj``
    (a public name may be documented in the module that defines it)."""
    import importlib

    try:
        return getattr(importlib.import_module(documented.rsplit(".", 1)[0]), name, None) is obj
    except ImportError:
        return False


def _check_site(app, exc):
    import importlib
    import inspect
    from urllib.parse import unquote, urlsplit

    from sphinx.util import logging

    if exc is not None or app.builder.format != "html":
        return
    log = logging.getLogger("gear.docs")
    out = str(app.outdir)
    ids = set()
    for folder, _, files in os.walk(out):
        for f in files:
            if not f.endswith(".html"):
                continue
            page = os.path.join(folder, f)
            with open(page, encoding="utf-8") as fh:
                html = fh.read()
            if os.path.relpath(page, out).startswith("api" + os.sep):
                ids.update(re.findall(r'\bid="(gear[\w.]*)"', html))
            for url in re.findall(r'\b(?:href|src)="([^"#][^"]*)"', html):
                parts = urlsplit(url)
                if parts.scheme or parts.netloc or url.startswith("mailto:"):
                    continue
                target = os.path.normpath(os.path.join(folder, unquote(parts.path)))
                if not os.path.exists(target):
                    log.warning("broken link in %s: %s (no file %s)", os.path.relpath(page, out),
                                url, os.path.relpath(target, out))
    for modname in _API_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue
            if not any(_same(i, name, obj) for i in ids if i.rsplit(".", 1)[-1] == name):
                log.warning("API reference: %s.%s (in its __all__) is not documented "
                            "(no docstring? add one, or describe it in docs/api/%s.rst)",
                            modname, name, modname)


def _no_builtin_docstring(app, what, name, obj, options, lines):
    """A public constant (``gear.cli.MECHANISMS``, a tuple) without a ``#:``
    comment would be documented by its type's docstring ("Built-in
    immutable sequence..."): drop that; the reference page describes it."""
    doc = type(obj).__doc__
    if what in ("data", "attribute") and type(obj).__module__ == "builtins" and doc and lines:
        if lines[0].strip() == doc.strip().splitlines()[0].strip():
            lines[:] = []


def setup(app):
    app.connect("viewcode-find-source", _find_source)
    app.connect("autodoc-process-docstring", _no_builtin_docstring, priority=100)
    app.connect("build-finished", _check_site)
