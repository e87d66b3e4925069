"""ASGI entry point: HTTP (with static files) and websockets.

Django is initialised before anything imports models or consumers. Served by
uvicorn (dashboard/server.py, `manage.py serve`).
"""

import os
import sys

from django.core.asgi import get_asgi_application

# One process serves every viewer's websocket on the event loop's thread while
# views (a run export writing a 1 GB document) run in worker threads, all under
# one GIL. Each time the loop thread comes back from a socket call while a view
# is running Python, it waits for the GIL up to the switch interval: 5 ms by
# default, several times per delivered event, so other viewers' events queue
# behind an export. So 0.5 ms (docs/benchmarks.md "bench/gil_switch.py").
GIL_SWITCH_INTERVAL = 0.0005
sys.setswitchinterval(GIL_SWITCH_INTERVAL)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter

from dashboard.body_guard import RequestBodyGuard
from dashboard.routing import websocket_urlpatterns
from dashboard.staticfiles import serve_static_files
from dashboard.ws_auth import TokenOrSessionAuth

application = ProtocolTypeRouter(
    {
        # Static files are served by ServeStatic (compressed, content-hashed,
        # cached for a year) before Django, in both modes: no separate web server is needed.
        # The body guard answers before a large body is read (refused when anonymous).
        "http": RequestBodyGuard(serve_static_files(django_http)),
        # Scripts: a Bearer token; browsers: the session, Origin-checked.
        "websocket": TokenOrSessionAuth(URLRouter(websocket_urlpatterns)),
    }
)
