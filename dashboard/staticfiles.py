"""Serve Plotly's own bundle (shipped inside the plotly package) as a static file."""

from __future__ import annotations

import re
from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
PLOTLY_STATIC_PATH = "vendor/plotly.min.js"


class PlotlyFinder(BaseFinder):
    """Finds exactly one file, `vendor/plotly.min.js`, in the installed plotly package."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_DIR))
        self.storage.prefix = "vendor"  # type: ignore[attr-defined]  # read by collectstatic; django-stubs leaves it out

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != PLOTLY_STATIC_PATH:
            return []  # what Django's own finders return for "not here"
        match = str(PLOTLY_DIR / "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage


# Plotly injects its own CSS (modebar, hover labels, notifier) into a <style>
# element, which a strict CSP forbids. Plotly skips that when the page already
# has an element `#plotly.js-style-global.no-inline-styles`; base.html links
# static/css/plotly.css under that id: the same rules, read from the bundle by
# plotly_css() (tests/dashboard/test_static_files.py checks they still match).
_PLOTLY_RULES = re.compile(r'"((?:[^"\\]|\\.)*)":(\'(?:[^\'\\]|\\.)*\'|"(?:[^"\\]|\\.)*")')


def plotly_css(bundle: str | None = None) -> str:
    """The stylesheet plotly.js would inject, as a file (a header, one rule a line)."""
    bundle = bundle if bundle is not None else (PLOTLY_DIR / "plotly.min.js").read_text(encoding="utf-8")
    version = re.search(r"plotly\.js v([\d.]+)", bundle)
    start = bundle.index('{"X,X div"')
    end = bundle.index("}", bundle.index(";for(", start) - 1)
    lines = [f"/* plotly.js {version.group(1) if version else '?'}: its injected CSS as a file (dashboard/staticfiles.plotly_css). */"]
    for selector, body in _PLOTLY_RULES.findall(bundle[start:end + 1]):
        selector = re.sub(r"^,", " ,", selector).replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        lines.append(f"{selector}{{{body[1:-1]}}}")
    return "\n".join(lines) + "\n"


def plotly_injected_style_ids(bundle: str | None = None) -> list[str]:
    """Ids of the other <style> elements the bundle injects unless an element with
    that id exists (its map library's CSS): base.html holds a placeholder for each."""
    bundle = bundle if bundle is not None else (PLOTLY_DIR / "plotly.min.js").read_text(encoding="utf-8")
    return re.findall(r'if\(!document\.getElementById\("([0-9a-f]{16,})"\)\)\{var \w+=document\.createElement\("style"\)', bundle)


if __name__ == "__main__":  # python -m dashboard.staticfiles > static/css/plotly.css
    print(plotly_css(), end="")
