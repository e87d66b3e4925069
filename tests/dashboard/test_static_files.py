import re

from django.conf import settings
from django.contrib.staticfiles import finders

from dashboard.staticfiles import PLOTLY_BUNDLE, plotly_css, plotly_injected_style_ids

# The trace types static/js draws: run/charts.js (scatter, its WebGL twin past
# 1,000 points, bar, heatmap) and compare.js (plotly.py's scatter figures).
PAGE_TRACES = {"scatter", "scattergl", "bar", "heatmap"}


def test_the_pages_load_the_vendored_partial_plotly_bundle():
    assert finders.find("vendor/plotly-frontier.min.js") == str(PLOTLY_BUNDLE)
    for template in ("runs/detail.html", "compare/runs.html"):
        assert (
            "{% static 'vendor/plotly-frontier.min.js' %}"
            in (settings.BASE_DIR / "templates" / template).read_text()
        )


def test_the_bundle_keeps_plotly_license_header_and_names_its_version():
    header = PLOTLY_BUNDLE.read_text(encoding="utf-8")[:300]
    assert re.search(r"plotly\.js \(frontier: [^)]*\) v4\.1\.1", header)
    assert (
        "Copyright 2012-2026, Plotly, Inc." in header and "Licensed under the MIT license" in header
    )


def plotly_trace_types() -> set[str]:
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType

    classes = (getattr(go, name) for name in go.__all__)  # go's attributes load lazily
    return {
        cls.__name__.lower()
        for cls in classes
        if isinstance(cls, type) and issubclass(cls, BaseTraceType)
    }


def test_the_bundle_registers_every_trace_type_the_pages_draw_and_no_other():
    """A trace type the bundle lacks is drawn by Plotly as a plain scatter, silently
    (scattergl as SVG: a 10,000-point chart takes seconds)."""
    scripts = "".join(path.read_text() for path in (settings.BASE_DIR / "static/js").rglob("*.js"))
    figures = "".join(path.read_text() for path in (settings.BASE_DIR / "dashboard").rglob("*.py"))
    typed = "\n".join(line for line in scripts.splitlines() if re.search(r"\btype\b|Type\b", line))  # type: "bar", pointsType
    used = set(re.findall(r'"([a-z0-9]+)"', typed)) & plotly_trace_types()
    used |= {
        name.lower() for name in re.findall(r"\bgo\.([A-Z][a-z0-9]+)\(", figures)
    } & plotly_trace_types()
    assert used == PAGE_TRACES
    bundle = PLOTLY_BUNDLE.read_text(encoding="utf-8")
    assert set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle)) == PAGE_TRACES


def test_the_plotly_build_recipe_is_not_collected_as_static_files():
    from django.apps import apps

    ignore = apps.get_app_config("staticfiles").ignore_patterns
    listed = {path for finder in finders.get_finders() for path, _ in finder.list(ignore)}
    assert "vendor/plotly-frontier.min.js" in listed
    assert not [path for path in listed if "plotly-build" in path]


def test_our_stylesheet_is_found():
    assert finders.find("css/frontier.css")


def test_the_plotly_stylesheet_is_the_css_the_bundled_plotly_would_inject():
    # `make vendor-plotly` regenerates it: python -m dashboard.staticfiles > static/css/plotly.css
    assert (settings.BASE_DIR / "static/css/plotly.css").read_text() == plotly_css()


def test_the_bundle_injects_no_style_element_besides_its_global_css():
    """Its map library's stylesheet is left out of the build (static/vendor/plotly-build/build.mjs);
    another <style> element would need a placeholder with its id in base.html (the CSP refuses it)."""
    base = (settings.BASE_DIR / "templates/base.html").read_text()
    assert all(f'id="{style_id}"' in base for style_id in plotly_injected_style_ids())
    assert plotly_injected_style_ids() == []


def test_every_response_carries_the_strict_content_security_policy(client):
    policy = client.get("/login/")["Content-Security-Policy"]
    assert (
        "script-src 'self'" in policy
        and "style-src 'self'" in policy
        and "unsafe-eval" not in policy
    )
    assert (
        "'unsafe-inline'" not in policy
    )  # not even for style attributes: static/js/csp-style-attributes.js


# ---- served by ServeStatic: hashed names, compressed, out of Django's way ------------------

HASHED = r"[0-9a-f]{12}"


def test_pages_name_each_static_file_by_its_content_hashed_name(user_client, user):
    from tests.factories import recorded_run

    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    html = user_client.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(rf'href="/static/css/frontier\.{HASHED}\.css"', html)
    assert re.search(rf'src="/static/vendor/plotly-frontier\.min\.{HASHED}\.js"', html)
    assert re.search(
        rf'<link rel="modulepreload" href="/static/js/run/charts\.{HASHED}\.js">', html
    )
    assert not re.search(r'(src|href)="/static/[^"]*(?<!\.[0-9a-f]{12})\.(js|css)"', html)


def test_a_hashed_module_imports_the_hashed_modules_the_page_preloads():
    """static/js's modules import each other by relative path: the collected copies
    name the hashed files, which the run page's modulepreload links fetch."""
    from django.contrib.staticfiles.storage import staticfiles_storage

    hashed = staticfiles_storage.stored_name("js/run-page.js")
    code = staticfiles_storage.open(hashed).read().decode()
    imports = re.findall(r'from "([^"]+)"', code)
    assert imports and all(re.search(rf"\.{HASHED}\.js$", path) for path in imports), imports
    assert (
        f'"./run/charts.{staticfiles_storage.stored_name("js/run/charts.js").split(".")[-2]}.js"'
        in code
    )


def test_static_files_are_served_by_servestatic_and_not_by_djangos_development_handler():
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.core.handlers.asgi import ASGIHandler
    from servestatic import ServeStaticASGI

    from dashboard.asgi import application

    chain, app = [], application.application_mapping["http"]
    while app is not None:
        chain.append(app)
        app = getattr(app, "app", None) or getattr(app, "application", None)
    assert not any(isinstance(layer, ASGIStaticFilesHandler) for layer in chain), chain
    static = next(layer for layer in chain if isinstance(layer, ServeStaticASGI))
    assert isinstance(chain[-1], ASGIHandler)
    assert any(
        re.fullmatch(rf"/static/vendor/plotly-frontier\.min\.{HASHED}\.js", url)
        for url in static.files
    )


def test_collecting_again_with_nothing_changed_does_nothing(settings, tmp_path):
    from dashboard.staticfiles import collect_static_files

    (tmp_path / "src" / "css").mkdir(parents=True)
    (tmp_path / "src" / "css" / "site.css").write_text("body { color: #1d2330; }\n" * 200)
    settings.STATICFILES_DIRS = [tmp_path / "src"]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STATIC_ROOT = tmp_path / "static"

    assert collect_static_files() is True
    hashed = [path.name for path in (tmp_path / "static" / "css").iterdir()]
    assert any(re.fullmatch(rf"site\.{HASHED}\.css", name) for name in hashed)
    assert any(re.fullmatch(rf"site\.{HASHED}\.css\.(br|gz)", name) for name in hashed)
    assert collect_static_files() is False

    (tmp_path / "src" / "css" / "site.css").write_text("body { color: #000; }\n" * 200)
    assert collect_static_files() is True
