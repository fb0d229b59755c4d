"""Signing in with the admin token, and out."""

from __future__ import annotations

import math

from share_store.errors import RateLimited
from sharing_server.auth.admin import admin_token_matches
from sharing_server.console.web import HOME, SIGN_IN, Call, Page, Redirect, safe_path
from sharing_server.observability.audit import audit_fields


def home(_call: Call) -> Redirect:
    return Redirect(HOME)


def sign_in_page(call: Call) -> Page | Redirect:
    if call.session.signed_in:
        return Redirect(safe_path(call.request.query_params.get("next")))
    return Page("sign_in.html", {"next": safe_path(call.request.query_params.get("next"))})


def sign_in(call: Call) -> Page | Redirect:
    """Only the admin token opens the console: a recipient's token is just a wrong token here.

    Wrong tokens are throttled per client address and in all (`SignInThrottle`), each an audit line.
    """
    target = safe_path(call.form.get("next"))
    token = call.form.get("token", "").strip()
    try:
        matches = admin_token_matches(call.request, call.console.admin_token, token)
    except RateLimited as error:
        headers = {"Retry-After": str(math.ceil(error.retry_after))}
        return Page("sign_in.html", {"next": target, "error": error.message}, status=429, headers=headers)
    if not matches:
        context = {"next": target, "error": "That is not the admin token."}
        return Page("sign_in.html", context, status=401)
    audit_fields(call.request)["sign_in"] = "admin"
    # A fresh session, CSRF token included: nothing from before signing in carries over.
    return Redirect(target, session=call.console.sessions.signed_in())


def not_found(call: Call) -> Page:
    """Any other address under /console: a page, not the API's JSON."""
    message = f"There is no console page at {call.request.url.path}."
    return Page("error.html", {"title": "Page not found", "message": message}, status=404)


def sign_out(_call: Call) -> Redirect:
    return Redirect(SIGN_IN, flash=("info", "Signed out."), sign_out=True)
