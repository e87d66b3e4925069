"""ASGI entry point: HTTP (with static files) and websockets.

Django is initialised before anything imports models or consumers.
"""

import os
import sys

from django.core.asgi import get_asgi_application

# One process serves every viewer's websocket on the event loop's thread while
# views (a run export writing a 1 GB document) run in worker threads, all under
# one GIL. With Python's default 5 ms switch interval, each time the loop thread
# comes back from a socket call while a view is computing, it waits up to 5 ms
# for the GIL (profiled during a 272 MB export: the loop's 3,055 socket sends took
# 2.6 ms each), so other viewers' events queue behind the export. At 0.5 ms they
# wait a tenth of that (bench/export.py; README "Benchmarks").
GIL_SWITCH_INTERVAL = 0.0005
sys.setswitchinterval(GIL_SWITCH_INTERVAL)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from dashboard.body_guard import RequestBodyGuard, install_daphne_body_limits  # noqa: E402
from dashboard.routing import websocket_urlpatterns  # noqa: E402
from dashboard.ws_auth import TokenOrSessionAuth  # noqa: E402

install_daphne_body_limits()

application = ProtocolTypeRouter(
    {
        # Static files (our own and Plotly's bundle) are served by the app itself,
        # under daphne, in both modes: no separate web server is needed.
        # The body guard answers before a large body is read (refused when anonymous).
        "http": RequestBodyGuard(ASGIStaticFilesHandler(django_http)),
        # Scripts: a Bearer token; browsers: the session, Origin-checked.
        "websocket": TokenOrSessionAuth(URLRouter(websocket_urlpatterns)),
    }
)
