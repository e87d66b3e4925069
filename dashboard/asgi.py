"""ASGI entry point: HTTP (with static files) and websockets.

Django is initialised before anything imports models or consumers. Served by
uvicorn (dashboard/server.py, `manage.py serve`).
"""

import os

from django.core.asgi import get_asgi_application

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
