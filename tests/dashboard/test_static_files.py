from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage  # noqa: F401

from dashboard.staticfiles import PLOTLY_DIR


def test_plotly_is_served_from_the_installed_plotly_package():
    found = finders.find("vendor/plotly.min.js")
    assert found == str(PLOTLY_DIR / "plotly.min.js")


def test_nothing_else_of_the_plotly_package_is_exposed():
    assert not finders.find("vendor/datasets")
    assert not finders.find("vendor/widgetbundle.js")


def test_our_stylesheet_is_found():
    assert finders.find("css/frontier.css")


def test_the_plotly_stylesheet_is_the_css_the_bundled_plotly_would_inject():
    # Regenerate after a plotly upgrade: python -m dashboard.staticfiles > static/css/plotly.css
    from django.conf import settings

    from dashboard.staticfiles import plotly_css

    assert (settings.BASE_DIR / "static/css/plotly.css").read_text() == plotly_css()


def test_the_base_page_holds_a_placeholder_for_every_style_element_plotly_would_inject():
    from django.conf import settings

    from dashboard.staticfiles import plotly_injected_style_ids

    base = (settings.BASE_DIR / "templates/base.html").read_text()
    ids = plotly_injected_style_ids()
    assert ids and all(f'id="{style_id}"' in base for style_id in ids)


def test_every_response_carries_the_strict_content_security_policy(client):
    policy = client.get("/login/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy and "unsafe-eval" not in policy
    assert "'unsafe-inline'" not in policy  # not even for style attributes: static/js/csp-style-attributes.js
