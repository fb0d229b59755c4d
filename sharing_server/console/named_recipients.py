"""Named recipients in the console: list and create, grant and revoke shares, issue and revoke tokens.

The same operations as `sharing-server recipient …` and `/admin/v1/recipients`, through the same
code. A new token is shown once, with its profile to download, or as its one-time activation link.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from sharing_server.admin.commands import DEFAULT_EXPIRES
from sharing_server.console.web import Call, Page, Redirect, confirmation

LIST = "/console/recipients"


def recipient_url(name: str) -> str:
    return f"{LIST}/{quote(name)}"


def list_recipients(call: Call) -> Page:
    return Page("recipients.html", {"recipients": call.admin.list_recipients(), "active": "recipients"})


def create_recipient(call: Call) -> Redirect:
    name = call.form.get("name", "").strip()
    call.admin.create_recipient(name)
    return Redirect(recipient_url(name), flash=("ok", f"Recipient {name} created: grant it shares."))


def recipient_page(call: Call) -> Page:
    info = call.admin.recipient_info(call.param("recipient"))
    # Names only: the shares' table and token counts are not needed to offer them.
    grantable = [s.name for s in call.admin.store.list_shares() if s.name not in info["shares"]]
    context = {
        "recipient": info,
        "grantable": grantable,
        "base": recipient_url(info["name"]),
        "active": "recipients",
    }
    return Page("recipient.html", context)


def grant_share(call: Call) -> Redirect:
    name, share = call.param("recipient"), call.form.get("share", "")
    call.admin.grant_share(name, share)
    return Redirect(recipient_url(name), flash=("ok", f"Share {share} granted: {name}'s tokens open it now."))


def revoke_share(call: Call) -> Redirect:
    name, share = call.param("recipient"), call.param("share")
    call.admin.revoke_recipient_share(name, share)
    return Redirect(
        recipient_url(name), flash=("ok", f"Share {share} revoked: {name}'s tokens no longer open it.")
    )


def create_token(call: Call) -> Page:
    name = call.param("recipient")
    expires = call.form.get("expires", "").strip() or DEFAULT_EXPIRES
    activation = call.form.get("activation") == "on"
    issued = call.admin.create_recipient_token(
        name, expires, call.form.get("description", "").strip(), activation
    )
    context = {"recipient": name, "issued": issued, "back": recipient_url(name), "active": "recipients"}
    if not activation:
        profile = json.dumps(issued["profile"], indent=2) + "\n"
        context |= {
            "profile": profile,
            # A data: link downloads the profile without sending the secret anywhere again.
            "profile_href": "data:application/json;base64," + base64.b64encode(profile.encode()).decode(),
            "profile_name": f"{name}.share",
        }
    return Page("recipient_issued.html", context)


def confirm_revoke_token(call: Call) -> Page:
    name, token_id = call.param("recipient"), call.param("token_id")
    consequence = f"Every request with this token, to any of {name}'s shares, is refused from now on."
    return confirmation(
        call, recipient_url(name), f"Revoke token {token_id} of {name}?", consequence, "Revoke token"
    )


def revoke_token(call: Call) -> Redirect:
    name, token_id = call.param("recipient"), call.param("token_id")
    call.admin.revoke_recipient_token(name, token_id)
    return Redirect(recipient_url(name), flash=("ok", f"Token {token_id} revoked."))


def confirm_remove(call: Call) -> Page:
    name = call.param("recipient")
    consequence = f"All of {name}'s tokens are revoked, and its grants removed; the shares stay."
    return confirmation(
        call, recipient_url(name), f"Remove recipient {name}?", consequence, "Remove recipient"
    )


def remove(call: Call) -> Redirect:
    name = call.param("recipient")
    call.admin.remove_recipient(name)
    return Redirect(LIST, flash=("ok", f"Recipient {name} removed; its tokens are revoked."))
