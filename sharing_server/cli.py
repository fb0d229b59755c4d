"""`sharing-server`: serve, and administer shares and tokens.

The grammar follows MinIO AIStor's `mc table share`, so its users can reuse
their commands:

    sharing-server share create SHARE SCHEMA "NAME:delta:BUCKET:PATH" ...
    sharing-server share update SHARE --add "SCHEMA:NAME:delta:BUCKET:PATH" --remove "SCHEMA/NAME"
    sharing-server share list | info SHARE | remove SHARE
    sharing-server token create SHARE --expires 30d --description TEXT [--profile FILE]
    sharing-server token list SHARE | revoke SHARE TOKEN_ID

Bad input prints one line and exits with status 2, leaving the store as it was.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from share_store.errors import AdminError, ShareStoreError
from share_store.model import TableSpec, parse_create_args, parse_table_ref
from share_store.persistence import ShareStore
from sharing_server.config import ServerConfig, load_config
from sharing_server.profiles import write_profile

DURATION = re.compile(r"^(\d+)([smhdw])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta | None:
    if text == "never":
        return None
    match = DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise AdminError(f"invalid duration {text!r}: use e.g. 3600s, 90m, 12h, 30d, 4w or 'never'")
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "never"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sharing-server", description="Delta Sharing server")
    parser.add_argument("--config", help="TOML configuration file")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the sharing server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--certfile", help="TLS certificate (PEM) for HTTPS")
    serve.add_argument("--keyfile", help="TLS private key (PEM) for HTTPS")
    serve.add_argument("--demo", action="store_true", help="seed the demo share before serving")

    commands.add_parser("demo", help="seed the demo share and profile (idempotent)")

    share = commands.add_parser("share", help="manage shares").add_subparsers(dest="action", required=True)
    create = share.add_parser("create", help="create a share, optionally with tables")
    create.add_argument("share")
    create.add_argument("tables", nargs="*", metavar="SCHEMA|NAME:delta:BUCKET:PATH")
    create.add_argument("--no-history", action="store_true", help="share only the latest version")
    upd = share.add_parser("update", help="add or remove tables")
    upd.add_argument("share")
    upd.add_argument("--add", action="append", default=[], metavar="SCHEMA:NAME:delta:BUCKET:PATH")
    upd.add_argument("--remove", action="append", default=[], metavar="SCHEMA/NAME")
    upd.add_argument(
        "--no-history", action="store_true", help="share only the latest version of added tables"
    )
    share.add_parser("list", help="list shares")
    info = share.add_parser("info", help="show a share's schemas and tables")
    info.add_argument("share")
    remove = share.add_parser("remove", help="remove a share and revoke its tokens")
    remove.add_argument("share")

    token = commands.add_parser("token", help="manage tokens").add_subparsers(dest="action", required=True)
    tcreate = token.add_parser("create", help="create a bearer token (shown once)")
    tcreate.add_argument("share")
    tcreate.add_argument("--expires", default="30d", help="lifetime: 3600s, 90m, 12h, 30d, 4w, never")
    tcreate.add_argument("--description", default="")
    tcreate.add_argument("--profile", type=Path, help="write a .share profile file here")
    tlist = token.add_parser("list", help="list a share's tokens")
    tlist.add_argument("share")
    revoke = token.add_parser("revoke", help="revoke a token")
    revoke.add_argument("share")
    revoke.add_argument("token_id")
    return parser


def check_catalogs(config: ServerConfig, specs: list[TableSpec]) -> None:
    """Refuse Iceberg specs whose warehouse no configured catalog serves."""
    uniform = [spec for spec in specs if spec.format == "uniform"]
    if uniform:
        catalogs = config.make_catalogs()
        for spec in uniform:
            catalogs.check_warehouse(spec.bucket)


def run_share(store: ShareStore, config: ServerConfig, args: argparse.Namespace) -> None:
    if args.action == "create":
        specs = parse_create_args(args.tables)
        check_catalogs(config, specs)
        store.create_share(args.share, specs, history_shared=not args.no_history)
        print(f"Created share '{args.share}' with {len(specs)} table(s).")
    elif args.action == "update":
        if not args.add and not args.remove:
            raise AdminError("nothing to do: give --add and/or --remove")
        add = [TableSpec.parse(spec) for spec in args.add]
        check_catalogs(config, add)
        remove = [parse_table_ref(ref) for ref in args.remove]
        store.update_share(args.share, add, remove, history_shared=not args.no_history)
        print(f"Updated share '{args.share}': {len(add)} added, {len(remove)} removed.")
    elif args.action == "list":
        for share in store.list_shares():
            count = len(store.list_tables(share.name))
            print(f"{share.name}\t{count} table(s)\tcreated {_when(share.created_at)}")
    elif args.action == "info":
        share = store.get_share(args.share)
        tables = store.list_tables(share.name)
        print(f"{share.name}")
        schemas: dict[str, list[str]] = {}
        for table in tables:
            history = "" if table.history_shared else " (latest only)"
            if table.is_iceberg:
                warehouse, name, namespace = table.iceberg_identifier
                where = f"{warehouse}:{'.'.join(namespace)}.{name}"
            else:
                where = f"{table.bucket}/{table.path}"
            schemas.setdefault(table.schema, []).append(f"{table.name}  [{table.format}] {where}{history}")
        for s_index, (schema, entries) in enumerate(schemas.items()):
            last_schema = s_index == len(schemas) - 1
            print(("└── " if last_schema else "├── ") + schema)
            for t_index, entry in enumerate(entries):
                branch = "└── " if t_index == len(entries) - 1 else "├── "
                print(("    " if last_schema else "│   ") + branch + entry)
        tokens = [t for t in store.list_tokens(share.name) if t.is_active(datetime.now(UTC))]
        print(f"{len(tokens)} active token(s)")
    elif args.action == "remove":
        store.remove_share(args.share)
        print(f"Removed share '{args.share}' and revoked its tokens.")


def run_token(store: ShareStore, config: ServerConfig, args: argparse.Namespace) -> None:
    if args.action == "create":
        token, secret = store.create_token(args.share, parse_duration(args.expires), args.description)
        print(f"Token id:   {token.id}")
        print(f"Expires:    {_when(token.expires_at)}")
        print(f"Endpoint:   {config.endpoint}")
        if args.profile:
            write_profile(args.profile, config.endpoint, secret, token.expires_at)
            print(f"Profile:    {args.profile} (keep it secret)")
        else:
            print(f"Token:      {secret}")
            print("The token is shown once; it is stored only as a hash.")
    elif args.action == "list":
        now = datetime.now(UTC)
        for token in store.list_tokens(args.share):
            state = "active" if token.is_active(now) else ("revoked" if token.revoked_at else "expired")
            print(f"{token.id}\t{state}\texpires {_when(token.expires_at)}\t{token.description}")
    elif args.action == "revoke":
        store.revoke_token(args.share, args.token_id)
        print(f"Revoked token {args.token_id}.")


def serve(config: ServerConfig, args: argparse.Namespace) -> None:
    import asyncio

    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    from sharing_server.app import create_app

    if args.host:
        config.host = args.host
    if args.port:
        config.port = args.port
    if args.certfile:
        config.certfile = args.certfile
    if args.keyfile:
        config.keyfile = args.keyfile
    store = ShareStore(config.resolved_store_url())
    if args.demo:
        from sharing_server.demo import seed_demo

        seed_demo(config, store)
    app = create_app(store, config.make_storage(), config.secret(), config.prefix, config.make_catalogs())
    hyper = Config()
    hyper.bind = [f"{config.host}:{config.port}"]
    hyper.certfile = config.certfile
    hyper.keyfile = config.keyfile
    hyper.accesslog = "-"
    # %(U)s is the path without the query: signed URLs never reach the log.
    hyper.access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(D)sus'
    print(f"Serving Delta Sharing at {config.endpoint}", flush=True)
    asyncio.run(hypercorn_serve(app, hyper))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        if args.command == "serve":
            serve(config, args)
            return 0
        store = ShareStore(config.resolved_store_url())
        try:
            if args.command == "demo":
                from sharing_server.demo import seed_demo

                seed_demo(config, store)
            elif args.command == "share":
                run_share(store, config, args)
            else:
                run_token(store, config, args)
        finally:
            store.close()
    except ShareStoreError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
