"""The grammar of `sharing-server table …`: AIStor Tables' warehouses, namespaces, tables and users.

It follows MinIO AIStor's `mc table`, whose commands name the cluster first
(`mc table warehouse create ALIAS WAREHOUSE`). This CLI talks to its own store
(or to `--server`), so the alias is optional: given, it is dropped with a note.
An alias is told from a name by counting words, never by guessing from the
words themselves: the first word is the alias exactly when there are more
words than the command's required names. So `namespace list A B` is
`ALIAS WAREHOUSE`, as in mc, and a parent namespace without an alias is given
with `--parent`. `sharing_server.admin.table_commands` runs what is parsed here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class AliasedWords(argparse.Action):
    """The positional words of a `table` command: `[ALIAS] NAME…`, each name set on the namespace.

    `names` are the destinations in order; the last `optional` of them may be left out.
    """

    def __init__(
        self,
        option_strings: list[str],
        dest: str,
        names: tuple[str, ...] = (),
        optional: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, nargs="*", **kwargs)
        self.names = names
        self.optional = optional

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [str(word) for word in values or []]
        required = len(self.names) - self.optional
        alias = words.pop(0) if len(words) > required else None
        if not required <= len(words) <= len(self.names):
            # `help` is the words as the usage line shows them: `[ALIAS] WAREHOUSE [PARENT]`.
            parser.error(f"expected {self.help}, got {len(words) + (alias is not None)} word(s)")
        if alias is not None:
            if not alias.rstrip("/") or "/" in alias.rstrip("/"):
                parser.error(f"invalid alias {alias!r}: an mc alias is one word")
            print(
                f"note: the alias {alias.rstrip('/')!r} is ignored (this CLI talks to its own server)",
                file=sys.stderr,
            )
        for index, name in enumerate(self.names):
            setattr(namespace, name, words[index] if index < len(words) else None)


def _leaf(
    parent: Any, name: str, what: str, words: tuple[str, ...], text: str, optional: int = 0
) -> argparse.ArgumentParser:
    """One `table` command: its words after an optional alias, and `what` for the dispatcher."""
    shown = " ".join(
        ["[ALIAS]", *(w.upper() for w in words[: len(words) - optional])]
        + [f"[{w.upper()}]" for w in words[len(words) - optional :]]
    )
    parser: argparse.ArgumentParser = parent.add_parser(
        name, help=text, description=text, usage=f"%(prog)s {shown} [options]"
    )
    parser.add_argument(
        "words", action=AliasedWords, names=words, optional=optional, metavar="WORD", help=shown
    )
    parser.set_defaults(what=what)
    return parser


def add_table_commands(commands: Any) -> None:
    """`table …` under the top-level subparsers `commands`."""
    table = commands.add_parser(
        "table",
        help="manage AIStor Tables: warehouses, namespaces, Iceberg tables, catalog users",
        description="AIStor Tables, in the grammar of `mc table`: an ALIAS given first is ignored. "
        "With --server, through the server's catalog API (/_iceberg/v1) as the admin.",
    ).add_subparsers(dest="action", required=True)

    warehouse = table.add_parser("warehouse", help="manage warehouses (each is a bucket)")
    verbs = warehouse.add_subparsers(dest="verb", required=True)
    created = _leaf(verbs, "create", "warehouse create", ("warehouse",), "create a warehouse and its bucket")
    created.add_argument(
        "--adopt",
        action="store_true",
        help="take a bucket that already exists as the warehouse, objects and all (refused otherwise)",
    )
    _leaf(verbs, "list", "warehouse list", (), "list warehouses")
    defaults = _leaf(
        verbs,
        "defaults",
        "warehouse defaults",
        ("warehouse",),
        "show, set or unset the properties every new table of a warehouse starts with "
        "(under its namespace's table-default.* and the create's own)",
    )
    defaults.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a table property's default, e.g. format-version=3 (repeat for more)",
    )
    defaults.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="drop a default (repeat for more)"
    )
    _leaf(verbs, "remove", "warehouse remove", ("warehouse",), "remove an empty warehouse")

    namespace = table.add_parser("namespace", help="manage namespaces (dotted for nested: sales.eu)")
    verbs = namespace.add_subparsers(dest="verb", required=True)
    _leaf(
        verbs,
        "create",
        "namespace create",
        ("warehouse", "namespace"),
        "create a namespace; a nested one's parent must exist",
    )
    nlist = _leaf(
        verbs,
        "list",
        "namespace list",
        ("warehouse", "parent"),
        "list namespaces, top-level or under a parent",
        optional=1,
    )
    nlist.add_argument(
        "--parent",
        dest="parent_option",
        metavar="NAMESPACE",
        help="list the namespaces under this one (dotted: sales.eu)",
    )
    _leaf(verbs, "remove", "namespace remove", ("warehouse", "namespace"), "remove an empty namespace")

    create = _leaf(
        table, "create", "table create", ("warehouse", "namespace", "table"), "create an Iceberg table"
    )
    create.add_argument(
        "--schema",
        required=True,
        metavar="JSON",
        help='the Iceberg schema: {"type": "struct", "fields": [...]}',
    )
    create.add_argument(
        "--partition",
        action="append",
        default=[],
        metavar="FIELD[:TRANSFORM]",
        help="partition by FIELD (identity) or FIELD:year|month|day|hour|bucket[N]|truncate[W]|void; "
        "repeat for more fields, in order",
    )
    create.add_argument(
        "--format-version",
        type=int,
        choices=(1, 2, 3),
        help="the Iceberg format version (default: the namespace's or warehouse's table default, else 2)",
    )
    create.add_argument(
        "--location",
        metavar="URI",
        help="where the table lives, inside its warehouse (default: chosen by the catalog)",
    )
    _leaf(table, "list", "table list", ("warehouse", "namespace"), "list a namespace's tables")
    _leaf(
        table,
        "info",
        "table info",
        ("warehouse", "namespace", "table"),
        "show a table's location, schema, partition spec and snapshots",
    )
    remove = _leaf(
        table,
        "remove",
        "table remove",
        ("warehouse", "namespace", "table"),
        "remove a table from the catalog",
    )
    remove.add_argument(
        "--purge",
        action="store_true",
        help="also delete its files (metadata, manifests, data) inside its location",
    )

    local_only = (
        "manage catalog users (SigV4 keys and policies), on the store only: the server has no HTTP "
        "API for users, so these commands refuse --server"
    )
    user = table.add_parser("user", help=local_only, description=local_only)
    verbs = user.add_subparsers(dest="verb", required=True)
    ucreate = verbs.add_parser("create", help="create a user; its secret key is shown once")
    ucreate.add_argument("name")
    ucreate.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="an IAM-style s3tables: policy (JSON); default: full access",
    )
    ucreate.set_defaults(what="user create")
    verbs.add_parser("list", help="list users").set_defaults(what="user list")
    uremove = verbs.add_parser("remove", help="remove a user; its keys stop working")
    uremove.add_argument("name")
    uremove.set_defaults(what="user remove")
