"""The recipients' catalog's one way in: `ShareTokenAuthentication`, a Starlette
`AuthenticationBackend` on each of its routes but the token endpoint and the signer (whose refusals
are 403s of their own), and `share_token`, the token a request that passed proved it holds.

On the routes, not the mount: an unknown method is a 405 whoever asks. Any active token passes:
a share's own token, which sees exactly its share, and a named recipient's, which opens several;
which share a request reads, and whether this token may, is the handler's to ask
(`share_store/iceberg_shares/opened_shares.py`): at the URLs that name a share, any token the share
is open to, at the others a share's own token only."""

from __future__ import annotations

from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

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
    expired; the token named in the audit line either way)."""

    def __init__(self, store: ShareStore) -> None:
        self.store = store

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, ShareTokenUser]:
        secret = bearer_secret(conn)
        token = await run_in_threadpool(self.store.authenticate, secret)
        record_token(conn, token)
        return AuthCredentials(["share"]), ShareTokenUser(token)


def share_token(connection: HTTPConnection) -> Token:
    """The token the request proved it holds, on a route behind `ShareTokenAuthentication`."""
    user = connection.user
    if not isinstance(user, ShareTokenUser):
        raise TypeError("the route is not behind ShareTokenAuthentication")
    return user.token
