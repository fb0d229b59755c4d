"""The admin API's one way in: `AdminAuthentication`, a Starlette `AuthenticationBackend` on each of
its routes (`sharing_server.admin.routes`), so an unknown path or method is answered (404, 405)
before any token is checked, and a request that passes carries `request.user`, the provider."""

from __future__ import annotations

from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.requests import HTTPConnection

from share_store.authentication.sign_in_throttle import AdminToken
from share_store.errors import Unauthenticated
from sharing_server.auth.admin import admin_token_matches
from sharing_server.auth.bearer import bearer_secret
from sharing_server.http.errors import AdminDisabled
from sharing_server.observability.audit import audit_fields

#: Who a request that offered the admin token is, in the audit line and on `request.user`.
ADMIN = "admin"


class AdminAuthentication(AuthenticationBackend):
    """The admin token as a bearer token, or a refusal the app answers in the protocol's model:
    `AdminDisabled` (403) without `[admin] token_hash`, `Unauthenticated` (401) for a wrong or
    missing token, `RateLimited` (429) while wrong ones are throttled, as the console's sign-in is."""

    def __init__(self, admin_token: AdminToken) -> None:
        self.admin_token = admin_token

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser]:
        if not self.admin_token.enabled:
            raise AdminDisabled("the admin API is disabled: set [admin] token_hash to enable it")
        if not admin_token_matches(conn, self.admin_token, bearer_secret(conn)):
            raise Unauthenticated("invalid admin token")
        audit_fields(conn)["principal"] = ADMIN
        return AuthCredentials([ADMIN]), SimpleUser(ADMIN)
