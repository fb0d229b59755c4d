"""Recipients of a share: bearer tokens and OAuth clients, created, rotated and revoked.

A new secret is shown once, on the page that answers the POST (never stored,
never in a URL), with its `.share` profile to download and a copy button.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from share_store.errors import AdminNotFound
from sharing_server.admin.commands import DEFAULT_EXPIRES, DEFAULT_GRACE
from sharing_server.console.shares import share_url
from sharing_server.console.web import Call, Page, Redirect, confirmation


def _issued(share: str, issued: dict[str, Any], kind: str) -> Page:
    profile = json.dumps(issued["profile"], indent=2) + "\n"
    context = {
        "share": share,
        "kind": kind,
        "issued": issued,
        "profile": profile,
        # A data: link downloads the profile without sending the secret anywhere again.
        "profile_href": "data:application/json;base64," + base64.b64encode(profile.encode()).decode(),
        "profile_name": f"{share}.share",
        "active": "shares",
    }
    return Page("issued.html", context)


def create_token(call: Call) -> Page:
    share = call.param("share")
    expires = call.form.get("expires", "").strip() or DEFAULT_EXPIRES
    issued = call.admin.create_token(share, expires, call.form.get("description", "").strip())
    return _issued(share, issued, "token")


def rotate_token(call: Call) -> Page:
    share = call.param("share")
    grace = call.form.get("grace", "").strip() or DEFAULT_GRACE
    issued = call.admin.rotate_token(share, call.param("token_id"), grace)
    return _issued(share, issued, "token")


def edit_token_page(call: Call) -> Page:
    share, token_id = call.param("share"), call.param("token_id")
    token = next(
        (t for t in call.admin.list_tokens(share) if t["id"] == token_id and t["state"] == "active"), None
    )
    if token is None:
        raise AdminNotFound(f"no active token '{token_id}' in share '{share}'")
    return Page(
        "token_edit.html", {"share": share, "token": token, "back": share_url(share), "active": "shares"}
    )


def edit_token(call: Call) -> Redirect:
    share, token_id = call.param("share"), call.param("token_id")
    expires = call.form.get("expires", "").strip() or None
    call.admin.update_token(share, token_id, expires, call.form.get("description", "").strip())
    return Redirect(share_url(share), flash=("ok", f"Token {token_id} updated."))


def confirm_revoke_token(call: Call) -> Page:
    share, token_id = call.param("share"), call.param("token_id")
    consequence = (
        f"Every request made with this token to {share} is refused from now on (401); "
        "recipients who hold its profile need a new one."
    )
    return confirmation(call, share_url(share), f"Revoke token {token_id}?", consequence, "Revoke token")


def revoke_token(call: Call) -> Redirect:
    share, token_id = call.param("share"), call.param("token_id")
    call.admin.revoke_token(share, token_id)
    return Redirect(share_url(share), flash=("ok", f"Token {token_id} revoked."))


def create_oauth_client(call: Call) -> Page:
    share = call.param("share")
    expires = call.form.get("expires", "").strip() or DEFAULT_EXPIRES
    issued = call.admin.create_oauth_client(share, expires, call.form.get("description", "").strip())
    return _issued(share, issued, "oauth")


def confirm_revoke_client(call: Call) -> Page:
    share, client_id = call.param("share"), call.param("client_id")
    consequence = (
        f"The client can no longer get access tokens for {share}, and the access "
        "tokens it already has are refused from now on."
    )
    return confirmation(
        call, share_url(share), f"Revoke OAuth client {client_id}?", consequence, "Revoke client"
    )


def revoke_oauth_client(call: Call) -> Redirect:
    share, client_id = call.param("share"), call.param("client_id")
    call.admin.revoke_oauth_client(share, client_id)
    return Redirect(share_url(share), flash=("ok", f"OAuth client {client_id} revoked."))
