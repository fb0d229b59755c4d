"""Admin operations on named recipients: `RecipientCommands`, which `Admin` takes on.

A recipient is granted shares and holds tokens that open all of them; per-share
tokens are unchanged. A recipient token may come with an activation link: a
one-time URL that serves the token's `.share` profile once, then answers 410.
"""

from __future__ import annotations

import json
import secrets
import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

from share_store.errors import AdminError
from share_store.lifetimes import bounded_lifetime
from share_store.model import Recipient
from share_store.persistence import ShareStore
from share_store.signing.secret_box import open_sealed, seal
from sharing_server import paths
from sharing_server.admin.changes import record_change
from sharing_server.admin.entries import admin_not_found, iso, issued_token, token_entry

#: How long an activation link may wait to be used.
ACTIVATION_LIFETIME = timedelta(days=7)
#: Associated data of a sealed profile: a sealed secret of another kind never opens as one.
ACTIVATION_PURPOSE = "recipient-activation"


def recipient_entry(recipient: Recipient) -> dict[str, Any]:
    return {
        "name": recipient.name,
        "id": recipient.id,
        "createdAt": iso(recipient.created_at),
        "shares": list(recipient.shares),
        "properties": dict(recipient.properties),
    }


def parse_properties(pairs: list[str]) -> dict[str, str]:
    """`--property k=v ...` as a dict; one `AdminError` for a pair without `=` or a key given twice
    (the keys and values are checked by the store)."""
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise AdminError(f"invalid --property {pair[:80]!r}: expected KEY=VALUE")
        if key in given:
            raise AdminError(f"--property {key[:80]!r} is given twice")
        given[key] = value
    return given


def _properties_change(given: dict[str, str], unset: list[str]) -> str:
    parts = [f"{key}={value}" for key, value in sorted(given.items())] + [f"-{key}" for key in unset]
    return "properties " + ", ".join(parts)


def _recipient_path(name: str) -> str:
    return paths.ADMIN_RECIPIENT.replace("{recipient}", urllib.parse.quote(name, safe=""))


class RecipientCommands:
    store: ShareStore
    endpoint: str
    max_lifetime: timedelta | None
    server_key: bytes | None

    @admin_not_found
    def create_recipient(self, name: str, properties: dict[str, str] | None = None) -> dict[str, Any]:
        created = self.store.create_recipient(name, _checked_object(properties))
        if created.properties:
            record_change(self.store, "POST", paths.ADMIN_RECIPIENTS, f"recipient {created.name}: "
                          + _properties_change(dict(created.properties), []))  # fmt: skip
        return recipient_entry(created)

    @admin_not_found
    def update_recipient(
        self, name: str, properties: dict[str, str] | None = None, unset: list[str] | None = None
    ) -> dict[str, Any]:
        """Set `properties` and remove `unset` of a recipient's: all or none."""
        given, removed = _checked_object(properties) or {}, list(unset or [])
        if not given and not removed:
            raise AdminError("nothing to do: give --property KEY=VALUE and/or --unset KEY")
        updated = self.store.update_recipient_properties(name, given, removed)
        change = f"recipient {updated.name}: " + _properties_change(given, removed)
        record_change(self.store, "PATCH", _recipient_path(updated.name), change)
        return recipient_entry(updated)

    def list_recipients(self) -> list[dict[str, Any]]:
        return [recipient_entry(recipient) for recipient in self.store.list_recipients()]

    @admin_not_found
    def recipient_info(self, name: str) -> dict[str, Any]:
        entry = recipient_entry(self.store.get_recipient(name))
        now = datetime.now(UTC)
        entry["tokens"] = [token_entry(token, now) for token in self.store.list_recipient_tokens(name)]
        return entry

    @admin_not_found
    def remove_recipient(self, name: str) -> None:
        self.store.remove_recipient(name)

    @admin_not_found
    def grant_share(self, name: str, share: str) -> dict[str, Any]:
        self.store.grant_share(name, share)
        return recipient_entry(self.store.get_recipient(name))

    @admin_not_found
    def revoke_recipient_share(self, name: str, share: str) -> dict[str, Any]:
        self.store.revoke_recipient_share(name, share)
        return recipient_entry(self.store.get_recipient(name))

    @admin_not_found
    def create_recipient_token(
        self, name: str, expires: str, description: str, activation: bool = False
    ) -> dict[str, Any]:
        """A token opening every share granted to `name`; with `activation`, a one-time link to its
        profile instead of the profile itself."""
        if activation and self.server_key is None:
            raise AdminError("activation links need the server key, which this command cannot read")
        lifetime = bounded_lifetime(expires, self.max_lifetime)
        token, secret = self.store.create_recipient_token(name, lifetime, description)
        issued = issued_token(self.endpoint, token, secret) | {"recipient": name}
        if not activation:
            return issued
        # The secret only behind the link: the answer holds neither it nor its profile.
        profile = issued.pop("profile")
        del issued["token"]
        assert self.server_key is not None
        code = secrets.token_urlsafe(32)
        expires_at = datetime.now(UTC) + ACTIVATION_LIFETIME
        if token.expires_at is not None:
            expires_at = min(expires_at, token.expires_at)
        sealed = seal(self.server_key, ACTIVATION_PURPOSE, json.dumps(profile))
        self.store.create_activation(code, token.id, sealed, expires_at)
        link = self.endpoint + paths.ACTIVATION.replace("{code}", code)
        return issued | {"activationLink": link, "activationExpiresAt": iso(expires_at)}

    @admin_not_found
    def list_recipient_tokens(self, name: str) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        return [token_entry(token, now) for token in self.store.list_recipient_tokens(name)]

    @admin_not_found
    def revoke_recipient_token(self, name: str, token_id: str) -> None:
        self.store.revoke_recipient_token(name, token_id)


def _checked_object(properties: Any) -> dict[str, str] | None:
    """The API's `properties`: an object of strings (the store checks the keys and values)."""
    if properties is None:
        return None
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise AdminError("'properties' must be an object of string values")
    return properties


def activated_profile(store: ShareStore, server_key: bytes, code: str) -> dict[str, Any]:
    """The profile an activation link serves, once (`ActivationGone` after)."""
    sealed = store.use_activation(code)
    return dict(json.loads(open_sealed(server_key, ACTIVATION_PURPOSE, sealed)))
