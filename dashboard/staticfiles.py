"""Frontier's static files: the vendored partial plotly.js bundle and the
stylesheet made from it."""

from __future__ import annotations

import re
from pathlib import Path

# Built by `make vendor-plotly` from the pinned sources in static/vendor/plotly-build/
# (the trace types the pages draw: scatter, scattergl, bar, heatmap).
PLOTLY_BUNDLE = Path(__file__).resolve().parents[1] / "static" / "vendor" / "plotly-frontier.min.js"


# Plotly injects its own CSS (modebar, hover labels, notifier) into a <style>
# element, which a strict CSP forbids. Plotly skips that when the page already
# has an element `#plotly.js-style-global.no-inline-styles`; base.html links
# static/css/plotly.css under that id: the same rules, read from the bundle by
# plotly_css() (tests/dashboard/test_static_files.py checks they still match).
_PLOTLY_RULES = re.compile(r'"((?:[^"\\]|\\.)*)":(\'(?:[^\'\\]|\\.)*\'|"(?:[^"\\]|\\.)*")')


def plotly_css(bundle: str | None = None) -> str:
    """The stylesheet plotly.js would inject, as a file (a header, one rule a line)."""
    bundle = bundle if bundle is not None else PLOTLY_BUNDLE.read_text(encoding="utf-8")
    version = re.search(r"plotly\.js(?: \([^)]*\))? v([\d.]+)", bundle)
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
    bundle = bundle if bundle is not None else PLOTLY_BUNDLE.read_text(encoding="utf-8")
    return re.findall(r'if\(!document\.getElementById\("([0-9a-f]{16,})"\)\)\{var \w+=document\.createElement\("style"\)', bundle)


if __name__ == "__main__":  # python -m dashboard.staticfiles > static/css/plotly.css
    print(plotly_css(), end="")
