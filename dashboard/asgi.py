"""ASGI entry point: HTTP (with static files) and websockets.

Django is initialised before anything imports models or consumers.
"""

import os

from django.core.asgi import get_asgi_application

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
