"""Which share a token reads at `/iceberg`, and for whom.

Two forms, one catalog. The URLs that name no share (`/iceberg/v1/namespaces/...`) serve a share's
own token, which opens exactly one share, read for no recipient (`SHARE_TOKEN`). The URLs that name
one (`/iceberg/v1/shares/<share>/...`, OpenSharing's form: `GET /v1/config?warehouse=<share>`
answers the prefix `shares/<share>`) serve any token the share is open to: its own token, or a
named recipient's token the share is granted to, read for that recipient and its properties (what
`CURRENT_RECIPIENT` reads in a restricted table's row filter).

Every share-named request looks the grant up again (`ShareStore.authorized_audience`, one SELECT
with the token): a share whose grant was removed is refused at once, its signatures too. A share
that does not exist and one the token may not open are the same 404, so that no token can probe
share names.
"""

from __future__ import annotations

from dataclasses import dataclass

from share_store.errors import Forbidden
from share_store.iceberg_shares.share_tables import SHARE_TOKEN
from share_store.model import Token
from share_store.persistence import ShareStore
from share_store.persistence.token_lookup import OnToken
from share_store.restrictions.restriction import Audience

#: Why a named recipient's token is refused at the URLs that name no share. The first words are
#: what clients and the tests have grepped since that form was the only one.
NAME_THE_SHARE = (
    "a named recipient's token opens several shares, and the URLs that name no share serve one share "
    "per token: name the share as the catalog's warehouse (GET /iceberg/v1/config?warehouse=SHARE), "
    "whose prefix puts it in every URL (/iceberg/v1/shares/SHARE/...)"
)


@dataclass(frozen=True)
class OpenedShare:
    """A share as one token reads it: its name as the store has it, and whom its tables are read for."""

    name: str
    audience: Audience
    #: Whether the URLs name the share (`shares/<share>`), or it is a share token's own form.
    named: bool = False

    @property
    def prefix(self) -> str:
        """The Iceberg REST prefix of the share's URLs."""
        return f"shares/{self.name}"


def own_share(token: Token) -> OpenedShare:
    """The share of a share's own token, at the URLs that name no share; a named recipient's
    token is refused (`Forbidden`): it must say which of its shares."""
    if token.recipient_id is not None:
        raise Forbidden(NAME_THE_SHARE)
    return OpenedShare(token.share, SHARE_TOKEN)


def open_share(
    store: ShareStore, secret: str, name: str, on_token: OnToken | None = None
) -> tuple[Token, OpenedShare]:
    """The token holding `secret` and the share `name` if the token may open it (`Unauthenticated`
    for a bad secret, `NotFound` for a share unknown or not the token's, alike)."""
    token, share, audience = store.authorized_audience(secret, name, on_token)
    return token, OpenedShare(share.name, audience, named=True)


def token_answers_config(token: Token, warehouse: str | None) -> bool:
    """Whether `configured_prefix` answers from the token alone, reading nothing from the store
    (no warehouse, or a share's own token naming its own share): callers need no worker thread."""
    return warehouse is None or (token.recipient_id is None and warehouse.lower() == token.share.lower())


def configured_prefix(store: ShareStore, secret: str, token: Token, warehouse: str | None) -> str | None:
    """The prefix `GET /v1/config` answers for `warehouse` (None: the URLs that name no share).

    A share's own token keeps the form it has always had (no prefix) for no warehouse or its own
    share; any other warehouse is the share-named form, for any token the share is open to."""
    if warehouse is None:
        own_share(token)
        return None
    if token_answers_config(token, warehouse):
        return None
    return open_share(store, secret, warehouse)[1].prefix
