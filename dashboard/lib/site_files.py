"""Where Frontier's served files are: templates, static files and examples.

In a checkout they are the repository's top-level `templates/`, `static/` and
`examples/`. A wheel carries copies of them inside the `dashboard` package
(`dashboard/site/…`, mapped there by pyproject.toml's hatch force-include),
since an installed distribution has no checkout around it. The package's copy
wins when it is there: a checkout never has one (the build writes it only into
the wheel), and a site-packages directory may hold anyone's `templates/`.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_SITE_DIR = Path(__file__).resolve().parents[1] / "site"
CHECKOUT_DIR = Path(__file__).resolve().parents[2]

#: True when running from an installed wheel rather than a checkout.
INSTALLED = (PACKAGE_SITE_DIR / "templates").is_dir()
SITE_DIR = PACKAGE_SITE_DIR if INSTALLED else CHECKOUT_DIR

TEMPLATES_DIR = SITE_DIR / "templates"
STATIC_DIR = SITE_DIR / "static"
EXAMPLES_DIR = SITE_DIR / "examples"


def default_data_dir() -> Path:
    """Where the embedded mode keeps its database, runs and collected static
    files when FRONTIER_DATA_DIR is not set: `var/` in a checkout (as `make demo`
    always has), else the platform's user data directory (the XDG rule on
    Linux: $XDG_DATA_HOME/frontier, by default ~/.local/share/frontier)."""
    if not INSTALLED:
        return CHECKOUT_DIR / "var"
    from platformdirs import user_data_dir

    return Path(user_data_dir("frontier", appauthor=False))
