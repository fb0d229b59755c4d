"""`GET {prefix}/activation/{code}`: a recipient token's profile, served once by its one-time link.

No bearer token: the code (256 random bits, stored hashed) is the key. The first
request gets the `.share` file; every later one, and any after the link expires,
gets 410 and nothing else.
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from share_store.persistence import ShareStore
from sharing_server.admin.recipient_commands import activated_profile
from sharing_server.observability.audit import audit_fields


class Activation:
    """Given the store and the server key, which seals the profiles links hold."""

    def __init__(self, store: ShareStore, secret: bytes) -> None:
        self.store = store
        self.secret = secret

    async def activate(self, request: Request) -> Response:
        code = str(request.path_params["code"])
        profile = await run_in_threadpool(activated_profile, self.store, self.secret, code)
        audit_fields(request)["activation"] = "used"  # never the code or the token
        return Response(
            json.dumps(profile, indent=2) + "\n",
            media_type="application/json",
            headers={
                "Content-Disposition": 'attachment; filename="config.share"',
                "Cache-Control": "no-store",
            },
        )
