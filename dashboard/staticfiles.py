"""Frontier's static files: served by ServeStatic, compressed and content-hashed
(both modes: `manage.py serve` with DEBUG on, the distributed web processes
with it off), plus the vendored partial plotly.js bundle and the stylesheet made from it.

Hashed names need `collectstatic`: `manage.py serve` calls collect_static_files()
first, the Docker image runs collectstatic when it is built, the tests' session
fixture (tests/conftest.py) before any test."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servestatic import ServeStaticASGI
from servestatic.storage import CompressedManifestStaticFilesStorage

from dashboard.lib.site_files import STATIC_DIR

# Built by `make vendor-plotly` from the pinned sources in static/vendor/plotly-build/
# (the trace types the pages draw: scatter, scattergl, bar, heatmap).
PLOTLY_BUNDLE = STATIC_DIR / "vendor" / "plotly-frontier.min.js"


class FrontierStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """ServeStatic's storage: each file also under a content-hashed name, with
    gzip and brotli versions made at collectstatic time. Two changes:

    - `{% static %}` gives the hashed name with DEBUG on too (Django gives the
      plain one then): `manage.py serve`, DEBUG on by default, serves as
      production does, and the browser may keep each file for a year;
    - ES module imports are rewritten to the hashed names (Django's
      support_js_module_import_aggregation): static/js's modules import each
      other by relative path, and the run page's modulepreload links name the
      hashed files, which are the ones its imports must fetch.
    """

    support_js_module_import_aggregation = True

    def compress_files(self, paths: set[str]):
        """Only the hashed files, and each once. ServeStatic compresses the plain
        copies too and every file on every run: 28 s of brotli on 2 cores at each
        `manage.py serve` after a change. A hashed name is its content, so an
        existing .gz or .br of it is current; the plain copies (no page links
        one) are served as they are."""
        hashed = set(self.hashed_files.values())
        fresh = {
            path
            for path in paths
            if path in hashed and not (self.exists(f"{path}.gz") or self.exists(f"{path}.br"))
        }
        return super().compress_files(fresh)

    def url(self, name: str | None, force: bool = False) -> str:
        try:
            return super().url(name, force=True)
        except ValueError as error:
            if self.hashed_files:
                raise
            raise ValueError(
                f"{error}: the static files are not collected in {self.location}; run "
                "`python manage.py collectstatic --noinput` (`manage.py serve` runs it)"
            ) from error


def serve_static_files(application: Any) -> ServeStaticASGI:
    """`application` behind ServeStatic, which answers /static/ from STATIC_ROOT
    (what collectstatic wrote) before Django sees the request: a hashed file
    with `Cache-Control: max-age=31536000, public, immutable`, its brotli or gzip
    version when the client accepts it, ETag / Last-Modified for conditional requests."""
    from django.conf import settings

    return ServeStaticASGI(
        application,
        root=settings.STATIC_ROOT,
        prefix=settings.STATIC_URL,
        # Files without a hash in their name (none of our pages links one): a minute.
        max_age=60,
        add_headers_function=_add_headers,
    )


ONE_YEAR = 365 * 24 * 60 * 60


def _add_headers(headers, path: str, url: str) -> None:
    # Django's SecurityMiddleware sends this on every page; static files skip Django.
    headers["X-Content-Type-Options"] = "nosniff"
    # A hashed name never changes its bytes: ServeStatic marks it immutable, for
    # ten years; a year is the customary value (RFC 2616 capped Expires at one year).
    if "immutable" in (headers.get("Cache-Control") or ""):
        headers["Cache-Control"] = f"max-age={ONE_YEAR}, public, immutable"


def collect_static_files(log: Callable[[str], object] | None = None) -> bool:
    """Runs `collectstatic` unless STATIC_ROOT already holds these very sources'
    output; True when it ran (`log`, if given, is told before). The first run
    hashes and compresses every file (~17 s on 2 cores, brotli of the three big
    bundles), a run after a change only the changed files (~2 s), and with
    nothing changed the check (a stat of each source file) takes ~50 ms:
    `manage.py serve` calls this at every start."""
    from django.conf import settings
    from django.core.management import call_command

    root = Path(settings.STATIC_ROOT)
    stamp = root / ".collected-from"
    sources = _sources_fingerprint()
    if (root / "staticfiles.json").exists() and stamp.exists() and stamp.read_text() == sources:
        return False
    if log:
        log(
            f"Collecting static files into {root} (hashed names, gzip and brotli; the first time takes ~20 s)"
        )
    call_command("collectstatic", "--noinput", verbosity=0)
    stamp.write_text(sources)
    return True


def _sources_fingerprint() -> str:
    """Every file collectstatic would collect (path, size, modification time) and
    what turns them into STATIC_ROOT (the storage, this module, Django's and
    ServeStatic's versions), hashed."""
    from importlib.metadata import version

    from django.apps import apps
    from django.conf import settings
    from django.contrib.staticfiles import finders

    # dashboard.apps.FrontierStaticFilesConfig's patterns (a StaticFilesConfig's attribute).
    ignore: list[str] = getattr(apps.get_app_config("staticfiles"), "ignore_patterns", [])
    listed = []
    for finder in finders.get_finders():
        for path, storage in finder.list(ignore):
            stat = Path(storage.path(path)).stat()
            listed.append(
                (getattr(storage, "prefix", None) or "", path, stat.st_size, stat.st_mtime_ns)
            )
    recipe = [
        settings.STORAGES["staticfiles"],
        settings.STATIC_URL,
        version("django"),
        version("servestatic"),
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        sorted(listed),
    ]
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()


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
    lines = [
        f"/* plotly.js {version.group(1) if version else '?'}: its injected CSS as a file (dashboard/staticfiles.plotly_css). */"
    ]
    for selector, body in _PLOTLY_RULES.findall(bundle[start : end + 1]):
        selector = (
            re.sub(r"^,", " ,", selector)
            .replace("X", ".js-plotly-plot .plotly")
            .replace("Y", ".plotly-notifier")
        )
        lines.append(f"{selector}{{{body[1:-1]}}}")
    return "\n".join(lines) + "\n"


def plotly_injected_style_ids(bundle: str | None = None) -> list[str]:
    """Ids of the other <style> elements the bundle injects unless an element with
    that id exists (its map library's CSS): base.html holds a placeholder for each."""
    bundle = bundle if bundle is not None else PLOTLY_BUNDLE.read_text(encoding="utf-8")
    return re.findall(
        r'if\(!document\.getElementById\("([0-9a-f]{16,})"\)\)\{var \w+=document\.createElement\("style"\)',
        bundle,
    )


if __name__ == "__main__":  # python -m dashboard.staticfiles > static/css/plotly.css
    print(plotly_css(), end="")
