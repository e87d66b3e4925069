"""Serve Plotly's own bundle (shipped inside the plotly package) as a static file."""

from __future__ import annotations

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
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != PLOTLY_STATIC_PATH:
            return []  # what Django's own finders return for "not here"
        match = str(PLOTLY_DIR / "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
