"""The recipients' catalog's one way in: `ShareTokenAuthentication`, a Starlette
`AuthenticationBackend` on each of its routes but the token endpoint and the signer (whose refusals
are 403s of their own), and `share_token`, the token a request that passed proved it holds.

On the routes, not the mount: an unknown method is a 405 whoever asks. A share token is the
catalog's bearer token and sees exactly its share; a named recipient's token opens several, and
this catalog serves one share per token."""

from __future__ import annotations

from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from share_store.errors import Forbidden
from share_store.model import Token
from share_store.persistence import ShareStore
from sharing_server.auth.bearer import bearer_secret, record_token


class ShareTokenUser(BaseUser):
    """A share token's holder, as `request.user`."""

    def __init__(self, token: Token) -> None:
        self.token = token

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.token.id


class ShareTokenAuthentication(AuthenticationBackend):
    """The bearer token, checked by the store (401 `Unauthenticated` if missing, unknown, revoked or
    expired; the token named in the audit line either way), and a token of one share (403)."""

    def __init__(self, store: ShareStore) -> None:
        self.store = store

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, ShareTokenUser]:
        secret = bearer_secret(conn)
        token = await run_in_threadpool(self.store.authenticate, secret)
        record_token(conn, token)
        if token.recipient_id is not None:
            raise Forbidden(
                "a named recipient's token opens several shares, and this catalog serves one share per "
                "token: use a token of the share (sharing-server token create SHARE)"
            )
        return AuthCredentials(["share"]), ShareTokenUser(token)


def share_token(connection: HTTPConnection) -> Token:
    """The token the request proved it holds, on a route behind `ShareTokenAuthentication`."""
    user = connection.user
    if not isinstance(user, ShareTokenUser):
        raise TypeError("the route is not behind ShareTokenAuthentication")
    return user.token
