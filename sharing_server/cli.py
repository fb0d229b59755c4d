"""`sharing-server`: serve, and administer shares, tokens, OAuth clients and AIStor Tables.

The grammar follows MinIO AIStor's `mc table share`, so its users can reuse
their commands:

    sharing-server share create SHARE SCHEMA "NAME:delta:BUCKET:PATH" ... [--display-name T] [--comment T]
                                [--property KEY=VALUE ...]
    sharing-server share update SHARE --add "SCHEMA:NAME:delta:BUCKET:PATH" --remove "SCHEMA/NAME"
                                [--display-name T] [--comment T] [--property KEY=VALUE ...] [--unset KEY ...]
    sharing-server share list | info SHARE | remove SHARE
    sharing-server share restrict SHARE SCHEMA/NAME [--where "SQL"] [--columns "a,b"] | --clear
    sharing-server recipient create NAME [--property KEY=VALUE ...]
    sharing-server recipient update NAME [--property KEY=VALUE ...] [--unset KEY ...]
    sharing-server token create SHARE --expires 30d --description TEXT [--profile FILE] [--oauth]
    sharing-server token list SHARE | revoke SHARE TOKEN_ID | rotate SHARE TOKEN_ID --grace 1h
    sharing-server oauth list SHARE | revoke SHARE CLIENT_ID
    sharing-server admin-token          (a new admin API token and the hash to configure)

and, after AIStor's `mc table` (the ALIAS is optional, and ignored):

    sharing-server table warehouse create|list|remove [ALIAS] WAREHOUSE
    sharing-server table warehouse retention [ALIAS] WAREHOUSE [--set 7d]   (how long dropped tables stay)
    sharing-server table namespace create|remove [ALIAS] WAREHOUSE NAMESPACE   (dotted: sales.eu)
    sharing-server table namespace list [ALIAS] WAREHOUSE [PARENT] | list WAREHOUSE --parent PARENT
    sharing-server table create [ALIAS] WAREHOUSE NAMESPACE TABLE --schema JSON
                                [--partition FIELD[:TRANSFORM] ...] [--format-version 1|2|3] [--location URI]
    sharing-server table list [ALIAS] WAREHOUSE NAMESPACE [--dropped] | info ... TABLE
    sharing-server table remove [ALIAS] WAREHOUSE NAMESPACE TABLE [--purge]   (without it: dropped, kept)
    sharing-server table undrop [ALIAS] WAREHOUSE NAMESPACE TABLE [--id ID]
    sharing-server table user create NAME [--policy FILE] | list | remove NAME   (on the store only)

Admin commands work on the configured store, or on a running server's admin
API with `--server URL` (token from SHARING_ADMIN_TOKEN or `--admin-token`);
`table` commands then go through its catalog API, `/_iceberg/v1`, as the admin.
Bad input prints one line and exits with status 2, leaving the store as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from share_store.authentication.tokens import ADMIN_TOKEN_PREFIX, hash_secret, new_secret
from share_store.errors import AdminError, ShareStoreError
from share_store.persistence import ShareStore
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server.admin.cli_grammar import build_parser
from sharing_server.admin.cli_output import print_issued, print_restriction, restriction_text, when
from sharing_server.admin.client import RemoteAdmin
from sharing_server.admin.commands import (
    Admin,
    AdminBackend,
    parse_duration,
)
from sharing_server.admin.recipient_cli import run_recipient
from sharing_server.admin.share_metadata_cli import listed_metadata, metadata_of, print_metadata
from sharing_server.auth.profiles import write_profile_document
from sharing_server.config import CONFIG_VARIABLE, ServerConfig, load_config
from sharing_server.failures import describe

__all__ = ["main", "parse_duration"]


def run_share(admin: AdminBackend, args: argparse.Namespace) -> None:
    if args.action == "create":
        created = admin.create_share(
            args.share, args.tables, not args.no_history, not args.no_check, metadata_of(args)
        )
        print(f"Created share '{created['name']}' with {created['tables']} table(s).")
    elif args.action == "update":
        updated = admin.update_share(
            args.share, args.add, args.remove, not args.no_history, not args.no_check, metadata_of(args)
        )
        print(f"Updated share '{args.share}': {updated['added']} added, {updated['removed']} removed.")
    elif args.action == "list":
        for share in admin.list_shares():
            print(f"{share['name']}\t{share['tables']} table(s)\tcreated {when(share['createdAt'])}"
                  + listed_metadata(share))  # fmt: skip
    elif args.action == "info":
        print_share_info(admin.share_info(args.share))
    elif args.action == "restrict":
        done = admin.restrict(args.share, args.table, args.where, args.columns, args.clear)
        print_restriction(done)
    elif args.action == "remove":
        admin.remove_share(args.share)
        print(f"Removed share '{args.share}' and revoked its tokens and OAuth clients.")


def print_share_info(info: dict[str, Any]) -> None:
    print(info["name"])
    print_metadata(info)
    schemas: dict[str, list[str]] = {}
    for table in info["tables"]:
        history = "" if table["historyShared"] else " (latest only)"
        if table["format"] == "uniform":
            where = f"{table['warehouse']}:{table['namespace']}.{table['table']}"
        else:
            where = f"{table['bucket']}/{table['path']}"
        restricted = restriction_text(table.get("restriction"))
        schemas.setdefault(table["schema"], []).append(
            f"{table['name']}  [{table['format']}] {where}{history}{restricted}"
        )
    for s_index, (schema, entries) in enumerate(schemas.items()):
        last_schema = s_index == len(schemas) - 1
        print(("└── " if last_schema else "├── ") + schema)
        for t_index, entry in enumerate(entries):
            branch = "└── " if t_index == len(entries) - 1 else "├── "
            print(("    " if last_schema else "│   ") + branch + entry)
    print(f"{info['activeTokens']} active token(s), {info['activeOAuthClients']} active OAuth client(s)")


CONFIG_FILE = "sharing.toml"


def find_config(given: str | None, env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """The configuration file to use, and how it was found (said when an admin command fails).

    `--config`, else `$SHARING_CONFIG`, else `./sharing.toml`; with none, the defaults
    (SQLite and files under ./.sharing).
    """
    variables = os.environ if env is None else env
    if given:
        return given, f"--config {given}"
    if variables.get(CONFIG_VARIABLE):
        return variables[CONFIG_VARIABLE], f"$SHARING_CONFIG = {variables[CONFIG_VARIABLE]}"
    if Path(CONFIG_FILE).is_file():
        return CONFIG_FILE, f"./{CONFIG_FILE}"
    return (
        None,
        "no configuration file (--config, $SHARING_CONFIG or ./sharing.toml): the defaults, ./.sharing",
    )


def local_backends(
    store: ShareStore, config: ServerConfig
) -> tuple[Callable[[], ObjectStorage], Callable[[], CatalogRegistry]]:
    """The configured storage and catalogs, each made once on first use, as the running server
    resolves them (its own warehouses first)."""
    from sharing_server.startup import server_secret

    @cache  # made once, whether the own warehouses or the table check asks first
    def storage() -> ObjectStorage:
        return config.make_storage(server_secret(config))

    def catalogs() -> CatalogRegistry:
        from share_store.catalog.catalog import WarehouseCatalog
        from share_store.catalog.table_source import OwnWarehouses

        registry = config.make_catalogs()
        registry.own = OwnWarehouses(WarehouseCatalog(store.transactions, storage()))
        return registry

    return storage, catalogs


def local_admin(store: ShareStore, config: ServerConfig) -> Admin:
    """The admin operations on the configured store; storage and catalogs are made only to check
    added tables (`Admin` checks them, here as through the admin API and the console)."""
    from sharing_server.startup import server_secret

    storage, catalogs = local_backends(store, config)
    key = server_secret(config)  # the same key as the server's: activation links open there
    return Admin(store, config.endpoint, catalogs, storage, config.options.max_token_lifetime, key)


def run_token(admin: AdminBackend, args: argparse.Namespace) -> None:
    if args.action == "create" and args.oauth:
        client = admin.create_oauth_client(args.share, args.expires, args.description)
        print(f"Client id:  {client['clientId']}")
        print(f"Expires:    {when(client['expiresAt'])}")
        print(f"Token URL:  {client['tokenEndpoint']}")
        if args.profile:
            write_profile_document(args.profile, client["profile"])
            print(f"Profile:    {args.profile} (version 2, OAuth client credentials; keep it secret)")
        else:
            print(f"Secret:     {client['clientSecret']}")
            print("The client secret is shown once; it is stored only as a hash.")
            print("Profile (save as a .share file; keep it secret):")
            print(json.dumps(client["profile"], indent=2))
    elif args.action == "create":
        print_issued(admin.create_token(args.share, args.expires, args.description), args.profile)
    elif args.action == "list":
        for token in admin.list_tokens(args.share):
            expires = when(token["expiresAt"])
            print(f"{token['id']}\t{token['state']}\texpires {expires}\t{token['description']}")
    elif args.action == "revoke":
        admin.revoke_token(args.share, args.token_id)
        print(f"Revoked token {args.token_id}.")
    elif args.action == "update":
        entry = admin.update_token(args.share, args.token_id, args.expires, args.description)
        print(
            f"Token {entry['id']}: expires {when(entry['expiresAt'])}, description {entry['description']!r}."
        )
    elif args.action == "rotate":
        issued = admin.rotate_token(args.share, args.token_id, args.grace)
        print_issued(issued, args.profile)
        print(f"Old token {args.token_id} keeps working until {when(issued['graceEndsAt'])}.")


def run_oauth(admin: AdminBackend, args: argparse.Namespace) -> None:
    if args.action == "list":
        for client in admin.list_oauth_clients(args.share):
            print(
                f"{client['clientId']}\t{client['state']}\texpires {when(client['expiresAt'])}"
                f"\t{client['description']}"
            )
    elif args.action == "revoke":
        admin.revoke_oauth_client(args.share, args.client_id)
        print(f"Revoked OAuth client {args.client_id} and its access tokens.")


def print_admin_token() -> None:
    token = new_secret(ADMIN_TOKEN_PREFIX)
    print(f"Admin token: {token}")
    print("Configure the server with its hash (the token itself is not stored anywhere):")
    print("  [admin]")
    print(f'  token_hash = "{hash_secret(token)}"')
    print("or SHARING_ADMIN_TOKEN_HASH; clients send it as SHARING_ADMIN_TOKEN.")


def serve(config: ServerConfig, args: argparse.Namespace) -> None:
    import asyncio

    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.run import run as hypercorn_run

    from sharing_server.observability.metrics import MULTIPROCESS_VARIABLE
    from sharing_server.serving import hypercorn_config
    from sharing_server.startup import build_app, open_services

    given = {"host": args.host, "port": args.port, "certfile": args.certfile, "keyfile": args.keyfile}
    overrides = {key: value for key, value in given.items() if value}
    for key, value in overrides.items():
        # Worker processes load the configuration again: hand them the overrides too.
        os.environ[f"SHARING_SERVER_{key.upper()}"] = str(value)
    config = dataclasses.replace(config, **overrides)  # options follow the new endpoint
    demo_token = None
    if args.demo and not config.admin.get("token_hash"):
        from sharing_server.demo import demo_admin_token

        # The demo's console needs an admin token: one made once and printed below.
        demo_token = demo_admin_token(config.data_dir)
        os.environ["SHARING_ADMIN_TOKEN_HASH"] = hash_secret(demo_token)  # for worker processes
        config = dataclasses.replace(config, admin={**config.admin, "token_hash": hash_secret(demo_token)})
    if args.config:
        os.environ[CONFIG_VARIABLE] = str(Path(args.config).resolve())
    options = config.options
    # Made before any worker starts: folders, the server key, the demo.
    services = open_services(config)
    if args.demo:
        from sharing_server.demo import seed_demo

        seed_demo(config, services.store)
    hyper = hypercorn_config(options)
    hyper.bind = [f"{config.host}:{config.port}"]
    hyper.certfile = config.certfile
    hyper.keyfile = config.keyfile
    if options.audit_log == "off":
        # Without the audit log, keep an access log; %(U)s is the path without
        # the query, so signed URLs never reach it.
        hyper.accesslog = "-"
        hyper.access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(D)sus'
    print(f"Serving Delta Sharing at {config.endpoint} ({config.workers} worker(s))", flush=True)
    from sharing_server.demo import print_console

    print_console(config, demo_token)
    if config.workers > 1:
        # Each worker is a process of its own with its own caches and limits; their
        # metrics meet in one directory, unless the operator has chosen one.
        hyper.workers = config.workers
        hyper.application_path = "sharing_server.asgi:app"
        services.close()  # each worker opens its own
        if os.environ.get(MULTIPROCESS_VARIABLE):
            hypercorn_run(hyper)
            return
        with tempfile.TemporaryDirectory(prefix="sharing-metrics-") as metrics_dir:
            os.environ[MULTIPROCESS_VARIABLE] = metrics_dir  # spawned workers inherit it
            hypercorn_run(hyper)
    else:
        try:
            # Starlette is an ASGI 3 app; hypercorn's type spells the protocol differently.
            asyncio.run(hypercorn_serve(build_app(services), hyper))  # type: ignore[arg-type]
        finally:
            services.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    config: ServerConfig | None = None
    config_source = "none"
    try:
        if args.command == "admin-token":
            print_admin_token()
            return 0
        if args.command == "share" and args.action == "derive" and args.server:
            raise AdminError("share derive runs where the storage is reachable: give it without --server")
        if args.server and args.command in ("share", "token", "oauth", "recipient"):
            run_admin(RemoteAdmin(args.server, args.admin_token or "", cafile=args.cafile), args)
            return 0
        if args.server and args.command == "table":
            # Imported here: pyiceberg's models take a third of a second that other commands never need.
            from sharing_server.admin.catalog.commands import run_remote

            run_remote(args)
            return 0
        config_path, config_source = find_config(args.config)
        config = load_config(config_path)
        if args.command == "serve":
            serve(config, args)
            return 0
        from sharing_server.startup import prepare_disk

        prepare_disk(config)
        store = ShareStore(config.resolved_store_url())
        try:
            if args.command == "demo":
                from sharing_server.demo import seed_demo

                seed_demo(config, store)
            elif args.command == "table":
                from sharing_server.admin.catalog.commands import run_local
                from sharing_server.startup import server_secret

                run_local(args, store, config, server_secret(config))
            elif args.command == "share" and args.action == "derive":
                from sharing_server.admin.derive_command import run_derive

                run_derive(args, store, config, *local_backends(store, config))
            else:
                run_admin(local_admin(store, config), args)
        finally:
            store.close()
    except ShareStoreError as error:
        # Which configuration was used: a store or catalog other than meant is the usual cause.
        admin = args.command in ("share", "token", "oauth", "recipient", "table") and not args.server
        suffix = f" (configuration: {config_source})" if admin else ""
        print(f"error: {error.message}{suffix}", file=sys.stderr)
        return 2
    except (OSError, SQLAlchemyError) as error:
        # The disk or the database refused (a data_dir it cannot write, a full disk):
        # the operator's to fix, told in one line.
        print(f"error: {describe(error, config.resolved_store_url() if config else None)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def run_admin(admin: AdminBackend, args: argparse.Namespace) -> None:
    if args.command == "recipient":
        run_recipient(admin, args)  # type: ignore[arg-type]  # both backends hold its methods
        return
    {"share": run_share, "token": run_token, "oauth": run_oauth}[args.command](admin, args)


if __name__ == "__main__":
    sys.exit(main())
