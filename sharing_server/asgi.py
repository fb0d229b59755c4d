"""The app built from configuration, for ASGI servers that import it by path.

`sharing-server serve` uses it when `[server] workers` is above 1: Hypercorn
then starts that many processes, each importing `sharing_server.asgi:app`.
It also lets any ASGI server run us directly:

    SHARING_CONFIG=/etc/sharing/sharing.toml hypercorn --workers 4 sharing_server.asgi:app
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from sharing_server.config import CONFIG_VARIABLE, load_config
from sharing_server.startup import build_app, open_services

__all__ = ["CONFIG_VARIABLE", "app"]


class ConfiguredApp:
    """An ASGI app that builds itself from the configuration at its first event (lifespan startup).

    Importing the module stays free of side effects; each worker process opens
    its own store connections once it starts.
    """

    def __init__(self) -> None:
        self._app: Starlette | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = build_app(open_services(load_config(os.environ.get(CONFIG_VARIABLE))))
        await self._app(scope, receive, send)


app = ConfiguredApp()
