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
