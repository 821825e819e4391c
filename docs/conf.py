"""Sphinx configuration of the pmewald documentation site.

The pages are the Markdown files in this folder (read with myst-parser); the API
reference (api.md, api/*.md) is generated from the docstrings with autodoc and
napoleon. Build: ``sphinx-build -W -b html docs docs/_build/html`` (the test
suite runs exactly that, warnings as errors, in tests/docs/test_docs.py).
"""

from __future__ import annotations

import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# An installed pmewald is used when there is one; otherwise the source tree
# (which still needs the compiled extension, pmewald._core, to import).
try:
    import pmewald  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import pmewald  # noqa: F401

project = "pmewald"
author = "the pmewald developers"
copyright = "the pmewald developers"
release = pmewald.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Optional integrations: their API pages are built only when the module imports
# (pmewald.interfaces.ase needs ASE, pmewald.interfaces.openmm needs OpenMM), so the site builds with or
# without the extras installed.
OPTIONAL_API = {"api/ase.md": "pmewald.interfaces.ase", "api/openmm.md": "pmewald.interfaces.openmm",
                "api/openmm_force.md": "pmewald.interfaces.openmm_force", "api/torch.md": "pmewald.interfaces.torch"}
optional_modules = {}
for page, module in OPTIONAL_API.items():
    try:
        importlib.import_module(module)
        optional_modules[module] = True
    except Exception:  # not present, or its extra is not installed
        optional_modules[module] = False
        exclude_patterns.append(page)

# Pages that other branches may add: docs/fft.md (the FFT layer). Links to it go
# through the {{ fft_link }} substitution, so the site builds with or without it.
HAVE_FFT_PAGE = os.path.exists(os.path.join(HERE, "fft.md"))
myst_enable_extensions = ["dollarmath", "colon_fence", "substitution"]
myst_substitutions = {
    "fft_link": "[the distributed FFT](fft.md)" if HAVE_FFT_PAGE
    else "the distributed FFT ({py:class}`pmewald.DistributedFFT`)",
}

# Optional toctree entries: a line "optional: NAME" inside a toctree becomes NAME
# when that page is part of the build, and disappears otherwise.
OPTIONAL_PAGES = {"fft": HAVE_FFT_PAGE}
OPTIONAL_PAGES.update({page[:-3]: ok for page, ok in
                       ((p, optional_modules[m]) for p, m in OPTIONAL_API.items())})


def _optional_toctree_entries(app, docname, source):
    lines = []
    for line in source[0].split("\n"):
        if line.startswith("optional: "):
            name = line[len("optional: "):].strip()
            if not OPTIONAL_PAGES.get(name, False):
                continue
            line = name
        lines.append(line)
    source[0] = "\n".join(lines)


def setup(app):
    app.connect("source-read", _optional_toctree_entries)
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True          # dataclass "Attributes" as fields, no duplicate targets
napoleon_use_rtype = False

# The docstrings write types in prose ("ndarray (n_local, 3)", "3 ints"), not as
# resolvable references; nitpicky stays off so they need not be.
nitpicky = False

html_theme = "alabaster"
html_title = f"pmewald {release}"
html_static_path = []
html_theme_options = {"description": "Smooth particle-mesh Ewald electrostatics over MPI"}

# Dataclass fields of the same name (System.box, OpenMMProblem.box) make napoleon's implicit
# cross-references to a parameter named `box` ambiguous; those references are not links anyway.
suppress_warnings = ["ref.python"]
