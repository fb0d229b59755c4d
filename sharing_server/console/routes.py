"""The console's routes under `/console`; each handler is wrapped by `web.console_endpoint`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from sharing_server.console import (
    activity,
    catalog_table,
    health,
    named_recipients,
    picker,
    recipients,
    shared_tables,
    shares,
    signin,
    warehouses,
)
from sharing_server.console.web import Console, View, console_endpoint

STATIC = Path(__file__).parent / "static"
SHARE = "/shares/{share}"
TABLE = SHARE + "/tables/{schema}/{table}"
TOKEN = SHARE + "/tokens/{token_id}"
CLIENT = SHARE + "/oauth-clients/{client_id}"
RECIPIENT = "/recipients/{recipient}"
# A table of the own warehouses: its namespace's levels joined with "." (names hold none).
OWN_TABLE = "/tables/{warehouse}/{namespace}/{table}"


def console_routes(console: Console | None) -> list[BaseRoute]:
    """The console's pages, each given the console (None when it is off: every page says so)."""

    def _page(path: str, view: View, method: str = "GET", public: bool = False) -> Route:
        return Route(path, console_endpoint(view, console, public), methods=[method])

    return _pages(_page, console)


def _pages(_page: Callable[..., Route], console: Console | None) -> list[BaseRoute]:
    return [
        _page("/", signin.home),
        _page("/sign-in", signin.sign_in_page, public=True),
        _page("/sign-in", signin.sign_in, "POST", public=True),
        _page("/sign-out", signin.sign_out, "POST"),
        _page("/shares", shares.list_shares),
        _page("/shares", shares.create_share, "POST"),
        _page(SHARE, shares.share_page),
        _page(SHARE + "/remove", shares.confirm_remove_share),
        _page(SHARE + "/remove", shares.remove_share, "POST"),
        _page(SHARE + "/tables", shares.add_table, "POST"),
        _page(SHARE + "/pick", picker.pick_page),
        _page(TABLE, shared_tables.table_page),
        _page(TABLE + "/remove", shares.confirm_remove_table),
        _page(TABLE + "/remove", shares.remove_table, "POST"),
        _page(SHARE + "/tokens", recipients.create_token, "POST"),
        _page(TOKEN + "/rotate", recipients.rotate_token, "POST"),
        _page(TOKEN + "/edit", recipients.edit_token_page),
        _page(TOKEN + "/edit", recipients.edit_token, "POST"),
        _page(TOKEN + "/revoke", recipients.confirm_revoke_token),
        _page(TOKEN + "/revoke", recipients.revoke_token, "POST"),
        _page(SHARE + "/oauth-clients", recipients.create_oauth_client, "POST"),
        _page(CLIENT + "/revoke", recipients.confirm_revoke_client),
        _page(CLIENT + "/revoke", recipients.revoke_oauth_client, "POST"),
        _page("/recipients", named_recipients.list_recipients),
        _page("/recipients", named_recipients.create_recipient, "POST"),
        _page(RECIPIENT, named_recipients.recipient_page),
        _page(RECIPIENT + "/remove", named_recipients.confirm_remove),
        _page(RECIPIENT + "/remove", named_recipients.remove, "POST"),
        _page(RECIPIENT + "/shares", named_recipients.grant_share, "POST"),
        _page(RECIPIENT + "/shares/{share}/revoke", named_recipients.revoke_share, "POST"),
        _page(RECIPIENT + "/tokens", named_recipients.create_token, "POST"),
        _page(RECIPIENT + "/tokens/{token_id}/revoke", named_recipients.confirm_revoke_token),
        _page(RECIPIENT + "/tokens/{token_id}/revoke", named_recipients.revoke_token, "POST"),
        _page("/tables", warehouses.tables_page),
        _page("/tables/share", warehouses.share_table_page),
        _page("/tables/defaults", warehouses.set_format_version, "POST"),
        _page("/tables/undrop", warehouses.undrop_table, "POST"),
        _page(OWN_TABLE, catalog_table.own_table_page),
        _page(OWN_TABLE + "/maintenance", catalog_table.run_maintenance, "POST"),
        _page("/activity", activity.activity_page),
        _page("/health", health.health_page),
        Mount("/static", StaticFiles(directory=STATIC), name="console_static"),
        Route(
            "/{rest:path}", console_endpoint(signin.not_found, console, public=True), methods=["GET", "HEAD"]
        ),
    ]
