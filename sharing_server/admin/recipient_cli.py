"""The `recipient` commands of the CLI: named recipients, their shares, tokens and activation links.

recipient create NAME [--property KEY=VALUE ...] | list | info NAME | remove NAME
recipient update NAME [--property KEY=VALUE ...] [--unset KEY ...]
recipient grant NAME SHARE | revoke-share NAME SHARE
recipient token create NAME [--expires 30d] [--description D] [--profile F | --activation]
recipient token list NAME | revoke NAME TOKEN_ID
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Protocol

from sharing_server.admin.cli_output import print_issued, when
from sharing_server.admin.commands import DEFAULT_EXPIRES
from sharing_server.admin.recipient_commands import parse_properties


class RecipientBackend(Protocol):
    """`Admin` on the store's host or `RemoteAdmin` through `/admin/v1`."""

    def create_recipient(self, name: str, properties: dict[str, str] | None = None) -> dict[str, Any]: ...
    def update_recipient(
        self, name: str, properties: dict[str, str] | None = None, unset: list[str] | None = None
    ) -> dict[str, Any]: ...
    def list_recipients(self) -> list[dict[str, Any]]: ...
    def recipient_info(self, name: str) -> dict[str, Any]: ...
    def remove_recipient(self, name: str) -> None: ...
    def grant_share(self, name: str, share: str) -> dict[str, Any]: ...
    def revoke_recipient_share(self, name: str, share: str) -> dict[str, Any]: ...
    def create_recipient_token(
        self, name: str, expires: str, description: str, activation: bool = False
    ) -> dict[str, Any]: ...
    def list_recipient_tokens(self, name: str) -> list[dict[str, Any]]: ...
    def revoke_recipient_token(self, name: str, token_id: str) -> None: ...


PROPERTY_HELP = "a property a restricted table's filter reads as CURRENT_RECIPIENT('KEY') (repeatable)"


def add_recipient_commands(commands: Any) -> None:  # argparse's subparsers action has no public type
    recipient = commands.add_parser("recipient", help="manage named recipients").add_subparsers(
        dest="action", required=True
    )
    create_recipient = recipient.add_parser("create", help="create a named recipient")
    create_recipient.add_argument("name")
    create_recipient.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP
    )
    update = recipient.add_parser("update", help="set or remove a recipient's properties")
    update.add_argument("name")
    update.add_argument("--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP)
    update.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a property")
    recipient.add_parser("list", help="list recipients and their shares")
    recipient.add_parser("info", help="a recipient's shares and tokens").add_argument("name")
    recipient.add_parser("remove", help="remove a recipient and revoke its tokens").add_argument("name")
    grant = recipient.add_parser("grant", help="grant a share: the recipient's tokens open it at once")
    grant.add_argument("name")
    grant.add_argument("share")
    revoke = recipient.add_parser("revoke-share", help="revoke a share from a recipient")
    revoke.add_argument("name")
    revoke.add_argument("share")
    token = recipient.add_parser("token", help="a recipient's tokens").add_subparsers(
        dest="step", required=True
    )
    create = token.add_parser("create", help="a token opening every share granted (shown once)")
    create.add_argument("name")
    create.add_argument("--expires", default=DEFAULT_EXPIRES, help=f"lifetime (default {DEFAULT_EXPIRES})")
    create.add_argument("--description", default="")
    given = create.add_mutually_exclusive_group()
    given.add_argument("--profile", type=Path, help="write the .share profile file here")
    given.add_argument(
        "--activation", action="store_true", help="print a one-time link that serves the profile once"
    )
    token.add_parser("list", help="list a recipient's tokens").add_argument("name")
    trevoke = token.add_parser("revoke", help="revoke a recipient's token")
    trevoke.add_argument("name")
    trevoke.add_argument("token_id")


def _print_recipient(entry: dict[str, Any]) -> None:
    shares = ", ".join(entry["shares"]) or "(none)"
    properties = entry.get("properties") or {}
    shown = ", ".join(f"{key}={value}" for key, value in sorted(properties.items())) or "(none)"
    print(f"{entry['name']}\tshares: {shares}\tproperties: {shown}")


def run_recipient(admin: RecipientBackend, args: argparse.Namespace) -> None:
    if args.action == "create":
        created = admin.create_recipient(args.name, parse_properties(args.property) or None)
        print(f"Created recipient {created['name']}.")
    elif args.action == "update":
        _print_recipient(admin.update_recipient(args.name, parse_properties(args.property), args.unset))
    elif args.action == "list":
        for entry in admin.list_recipients():
            _print_recipient(entry)
    elif args.action == "info":
        info = admin.recipient_info(args.name)
        _print_recipient(info)
        for token in info["tokens"]:
            print(f"  token {token['id']}\t{token['state']}\texpires {when(token['expiresAt'])}")
    elif args.action == "remove":
        admin.remove_recipient(args.name)
        print(f"Removed recipient {args.name}; its tokens are revoked.")
    elif args.action == "grant":
        _print_recipient(admin.grant_share(args.name, args.share))
    elif args.action == "revoke-share":
        _print_recipient(admin.revoke_recipient_share(args.name, args.share))
    elif args.action == "token":
        _run_token(admin, args)


def _run_token(admin: RecipientBackend, args: argparse.Namespace) -> None:
    if args.step == "create":
        issued = admin.create_recipient_token(args.name, args.expires, args.description, args.activation)
        if not args.activation:
            print_issued(issued, args.profile)
            return
        print(f"Token id:   {issued['id']}")
        print(f"Expires:    {when(issued['expiresAt'])}")
        print(f"Activation: {issued['activationLink']}")
        print(f"The link serves the profile once, until {when(issued['activationExpiresAt'])}.")
    elif args.step == "list":
        for token in admin.list_recipient_tokens(args.name):
            print(
                f"{token['id']}\t{token['state']}\texpires {when(token['expiresAt'])}\t{token['description']}"
            )
    elif args.step == "revoke":
        admin.revoke_recipient_token(args.name, args.token_id)
        print(f"Revoked token {args.token_id}.")
