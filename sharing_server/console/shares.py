"""Shares: the list, one share with its tables and recipients, adding and removing tables.

Every change goes through `Admin`, as the CLI's and the admin API's do, so the
table-spec grammar, the check that an added table is there (skipped by the
"Share before it is written" box, the CLI's `--no-check`) and their error
messages are the same everywhere.
"""

from __future__ import annotations

from urllib.parse import quote

from sharing_server.console.web import Call, Page, Redirect, confirmation


def share_url(share: str) -> str:
    return f"/console/shares/{quote(share)}"


#: The box that shares tables before they are written (the CLI's `--no-check`).
UNCHECKED = "unchecked"


def checked(call: Call) -> bool:
    """Whether to check that added tables are there: unless the form's box says they come later."""
    return call.form.get(UNCHECKED) != "on"


#: Shares on one page of the list.
PAGE = 50


def list_shares(call: Call) -> Page:
    # `?tables=` fills the create form's tables (the Tables page's "a new share" link).
    params = call.request.query_params
    search, after = params.get("q", "").strip(), params.get("after") or None
    shares = call.admin.list_shares(search, after, PAGE + 1)
    more = len(shares) > PAGE
    context = {
        "shares": shares[:PAGE],
        "search": search,
        "after": after,
        "next": shares[PAGE - 1]["name"] if more else None,
        "tables": params.get("tables", ""),
        "active": "shares",
    }
    return Page("shares.html", context)


def create_share(call: Call) -> Redirect:
    name = call.form.get("name", "").strip()
    specs = [line.strip() for line in call.form.get("tables", "").splitlines() if line.strip()]
    call.admin.create_share(name, specs, history=call.form.get("history") == "on", check=checked(call))
    return Redirect(share_url(name), flash=("ok", f"Share {name} created."))


def share_page(call: Call) -> Page:
    share = call.param("share")
    info = call.admin.share_info(share)
    tokens = call.admin.list_tokens(share)
    clients = call.admin.list_oauth_clients(share)
    last_use = call.admin.token_last_use([token["id"] for token in tokens])
    context = {
        "share": info,
        "tokens": tokens,
        "clients": clients,
        "last_use": last_use,
        "spec": call.request.query_params.get("spec", ""),
        "active": "shares",
    }
    return Page("share.html", context)


def add_table(call: Call) -> Redirect:
    share = call.param("share")
    # One spec per line: several tables in one change, all or none (the store's one transaction).
    specs = [line.strip() for line in call.form.get("spec", "").splitlines() if line.strip()]
    call.admin.update_share(share, specs, [], history=call.form.get("history") == "on", check=checked(call))
    added = specs[0] if len(specs) == 1 else f"{len(specs)} tables"
    return Redirect(share_url(share), flash=("ok", f"Added {added}."))


def confirm_remove_table(call: Call) -> Page:
    share, schema, table = call.param("share"), call.param("schema"), call.param("table")
    call.admin.get_table(share, schema, table)  # 404 for a table the share does not hold
    info = call.admin.share_info(share)
    consequence = (
        f"Recipients of {share} ({info['activeTokens']} active token(s), {info['activeOAuthClients']} "
        f"OAuth client(s)) will no longer see {schema}.{table}: listing leaves it out and reading it "
        "answers 404. Its data stays where it is."
    )
    return confirmation(
        call, share_url(share), f"Remove {schema}.{table} from {share}?", consequence, "Remove table"
    )


def remove_table(call: Call) -> Redirect:
    share, schema, table = call.param("share"), call.param("schema"), call.param("table")
    call.admin.update_share(share, [], [f"{schema}/{table}"])  # the CLI's --remove SCHEMA/NAME
    return Redirect(share_url(share), flash=("ok", f"Removed {schema}.{table} from {share}."))


def confirm_remove_share(call: Call) -> Page:
    share = call.param("share")
    info = call.admin.share_info(share)
    consequence = (
        f"All {len(info['tables'])} table(s) of {share} stop being shared, and its "
        f"{info['activeTokens']} active token(s) and {info['activeOAuthClients']} OAuth client(s) are "
        "revoked: every recipient's next request is refused. The tables' data stays where it is."
    )
    return confirmation(call, share_url(share), f"Remove share {share}?", consequence, "Remove share")


def remove_share(call: Call) -> Redirect:
    share = call.param("share")
    call.admin.remove_share(share)
    return Redirect("/console/shares", flash=("ok", f"Share {share} removed."))
