"""Signing in with the admin token, and out."""

from __future__ import annotations

from sharing_server.console.web import HOME, SIGN_IN, Call, Page, Redirect, safe_path


def home(_call: Call) -> Redirect:
    return Redirect(HOME)


def sign_in_page(call: Call) -> Page | Redirect:
    if call.session.signed_in:
        return Redirect(safe_path(call.request.query_params.get("next")))
    return Page("sign_in.html", {"next": safe_path(call.request.query_params.get("next"))})


def sign_in(call: Call) -> Page | Redirect:
    """Only the admin token opens the console: a recipient's token is just a wrong token here."""
    target = safe_path(call.form.get("next"))
    if not call.console.token_matches(call.form.get("token", "")):
        context = {"next": target, "error": "That is not the admin token."}
        return Page("sign_in.html", context, status=401)
    # A fresh session, CSRF token included: nothing from before signing in carries over.
    return Redirect(target, session=call.console.sessions.signed_in())


def sign_out(_call: Call) -> Redirect:
    return Redirect(SIGN_IN, flash=("info", "Signed out."), sign_out=True)
