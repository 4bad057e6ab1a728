"""ASGI entry point: HTTP (Django) and WebSocket (Channels). Served by daphne:
`daphne -b 127.0.0.1 -p 8000 explorer.asgi:application`."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "explorer.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from explorer.accounts.ws_auth import ws_auth  # noqa: E402
from explorer.compilations.routing import websocket_urlpatterns  # noqa: E402
from explorer.web import bounded  # noqa: E402
from explorer.web.asgi import BodyLimit, OriginCheck  # noqa: E402

bounded.install()  # under daphne: request bodies bounded before they are read (explorer/web/bounded.py)

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": OriginCheck(ws_auth(URLRouter(websocket_urlpatterns))),
    }
)
