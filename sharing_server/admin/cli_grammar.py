"""The command line's grammar: every `sharing-server` command, its arguments and their help.

It follows MinIO AIStor's `mc table share`, so its users can reuse their
commands (see `sharing_server.cli` for the list); `cli` runs what is parsed here.
The `table` commands (AIStor Tables, after `mc table`) are in `table_grammar`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sharing_server.admin.catalog.grammar import add_table_commands
from sharing_server.admin.commands import DEFAULT_EXPIRES, DEFAULT_GRACE
from sharing_server.admin.recipient_cli import add_recipient_commands
from sharing_server.admin.share_metadata_cli import add_metadata_arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sharing-server", description="Delta Sharing server")
    parser.add_argument("--config", help="TOML configuration file")
    parser.add_argument(
        "--server",
        default=os.environ.get("SHARING_ADMIN_URL"),
        help="manage a running server through its admin API (default: $SHARING_ADMIN_URL)",
    )
    parser.add_argument(
        "--admin-token",
        default=os.environ.get("SHARING_ADMIN_TOKEN"),
        help="the admin API token (default: $SHARING_ADMIN_TOKEN; prefer the variable)",
    )
    parser.add_argument("--cafile", help="CA bundle to verify the --server certificate")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the sharing server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--certfile", help="TLS certificate (PEM) for HTTPS")
    serve.add_argument("--keyfile", help="TLS private key (PEM) for HTTPS")
    serve.add_argument("--demo", action="store_true", help="seed the demo share before serving")

    commands.add_parser("demo", help="seed the demo share and profile (idempotent)")
    commands.add_parser("admin-token", help="print a new admin API token and the token_hash to configure")

    share = commands.add_parser("share", help="manage shares").add_subparsers(dest="action", required=True)
    create = share.add_parser("create", help="create a share, optionally with tables")
    create.add_argument("share", type=share_argument)
    create.add_argument("tables", nargs="*", metavar="SCHEMA|NAME:delta:BUCKET:PATH")
    create.add_argument("--no-history", action="store_true", help="share only the latest version")
    create.add_argument(
        "--no-check", action="store_true", help="share tables written later: do not check that they exist"
    )
    add_metadata_arguments(create, update=False)
    upd = share.add_parser(
        "update", help="add or remove tables, change the display name, comment, properties"
    )
    upd.add_argument("share", type=share_argument)
    upd.add_argument("--add", action="append", default=[], metavar="SCHEMA:NAME:delta:BUCKET:PATH")
    upd.add_argument("--remove", action="append", default=[], metavar="SCHEMA/NAME")
    upd.add_argument(
        "--no-history", action="store_true", help="share only the latest version of added tables"
    )
    upd.add_argument(
        "--no-check", action="store_true", help="share tables written later: do not check that they exist"
    )
    add_metadata_arguments(upd, update=True)
    restrict = share.add_parser(
        "restrict", help="serve part of a table: the rows where --where holds, the --columns listed"
    )
    restrict.add_argument("share", type=share_argument)
    restrict.add_argument("table", metavar="SCHEMA/NAME")
    restrict.add_argument(
        "--where",
        help="a SQL predicate over the table's columns (CURRENT_RECIPIENT('key'): a recipient's property)",
    )
    restrict.add_argument("--columns", help='the columns served, comma-separated: "a,b,c"')
    restrict.add_argument(
        "--clear", action="store_true", help="remove the restriction: share the whole table"
    )
    derive = share.add_parser(
        "derive",
        help="make a restricted table's derived files on Spark (a big table, before its recipients ask)",
    )
    derive.add_argument("share", type=share_argument)
    derive.add_argument("table", metavar="SCHEMA/NAME")
    derive.add_argument(
        "--recipient", action="append", default=[], metavar="NAME",
        help="derive the rows of this recipient (repeatable; default: every recipient granted the share, "
        "or the share's own tokens when the filter names no recipient property)",
    )  # fmt: skip
    derive.add_argument("--version", type=int, help="the table version to derive (default: the latest)")
    derive.add_argument("--master", default="local[*]", help="Spark's master (default: local[*])")
    derive.add_argument("--dry-run", action="store_true", help="plan and print, derive nothing")
    share.add_parser("list", help="list shares")
    info = share.add_parser("info", help="show a share's metadata, schemas and tables")
    info.add_argument("share", type=share_argument)
    remove = share.add_parser("remove", help="remove a share and revoke its tokens and clients")
    remove.add_argument("share", type=share_argument)

    token = commands.add_parser("token", help="manage tokens").add_subparsers(dest="action", required=True)
    tcreate = token.add_parser("create", help="create a bearer token or OAuth client (shown once)")
    tcreate.add_argument("share", type=share_argument)
    tcreate.add_argument(
        "--expires",
        default=DEFAULT_EXPIRES,
        help=f"lifetime: 3600s, 90m, 12h, 30d, 4w, never (default {DEFAULT_EXPIRES})",
    )
    tcreate.add_argument("--description", default="")
    tcreate.add_argument("--profile", type=Path, help="write a .share profile file here")
    tcreate.add_argument(
        "--oauth",
        action="store_true",
        help="create an OAuth2 client (profile version 2, client credentials) instead of a bearer token",
    )
    tlist = token.add_parser("list", help="list a share's bearer tokens")
    tlist.add_argument("share", type=share_argument)
    revoke = token.add_parser("revoke", help="revoke a token")
    revoke.add_argument("share", type=share_argument)
    revoke.add_argument("token_id")
    edit = token.add_parser("update", help="change a token's description and/or expiry (from now)")
    edit.add_argument("share", type=share_argument)
    edit.add_argument("token_id")
    edit.add_argument("--expires", help="new lifetime from now: 3600s, 90m, 12h, 30d, 4w, never")
    edit.add_argument("--description")
    rotate = token.add_parser("rotate", help="replace a token; the old one works for a grace period")
    rotate.add_argument("share", type=share_argument)
    rotate.add_argument("token_id")
    rotate.add_argument(
        "--grace",
        default=DEFAULT_GRACE,
        help=f"how long the old token keeps working (default {DEFAULT_GRACE})",
    )
    rotate.add_argument("--profile", type=Path, help="write the new .share profile file here")

    oauth = commands.add_parser("oauth", help="manage OAuth clients").add_subparsers(
        dest="action", required=True
    )
    olist = oauth.add_parser("list", help="list a share's OAuth clients")
    olist.add_argument("share", type=share_argument)
    orevoke = oauth.add_parser("revoke", help="revoke an OAuth client and its access tokens")
    orevoke.add_argument("share", type=share_argument)
    orevoke.add_argument("client_id")

    add_recipient_commands(commands)
    add_table_commands(commands)
    return parser


def share_argument(value: str) -> str:
    """A share name, also in AIStor's `ALIAS/SHARE` form (`mc table share … minio/test`).

    The alias names a server in mc's configuration; this CLI talks to its own
    (or to `--server`), so the alias is dropped, and said so.
    """
    alias, slash, name = value.rpartition("/")
    if not slash:
        return value
    if not alias or not name or "/" in alias:
        raise argparse.ArgumentTypeError(f"invalid share name {value!r}: use SHARE (or ALIAS/SHARE)")
    print(f"note: share {name!r}: the alias {alias!r} is ignored (this CLI talks to its own server)",
          file=sys.stderr)  # fmt: skip
    return name
