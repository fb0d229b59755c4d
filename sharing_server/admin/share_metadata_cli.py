"""The CLI's words for a share's metadata: `--display-name`, `--comment`, `--property KEY=VALUE` and
(on update) `--unset KEY`, as `share create` and `share update` take them, and how `share info`
and `share list` print it.

`--property` is read by the recipient commands' `parse_properties`, so both say a pair alike.
"""

from __future__ import annotations

import argparse
from typing import Any

from share_store.persistence.share_metadata import MetadataChange
from sharing_server.admin.recipient_commands import parse_properties
from sharing_server.admin.share_metadata import metadata_change

#: How much of a comment `share list` shows: its first line, cut here.
LISTED_COMMENT = 60


def add_metadata_arguments(parser: argparse.ArgumentParser, update: bool) -> None:
    cleared = ' ("" clears it)' if update else ""
    parser.add_argument(
        "--display-name",
        metavar="TEXT",
        help=f"the name recipients are shown, at most 255 characters{cleared}",
    )
    parser.add_argument(
        "--comment", metavar="TEXT", help=f"what the share holds, for its recipients{cleared}"
    )
    parser.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE",
        help="a property recipients see with the share (repeatable; at most 50)",
    )  # fmt: skip
    if update:
        parser.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a property")


def metadata_of(args: argparse.Namespace) -> MetadataChange:
    """The metadata change `args` ask; one `AdminError` for a bad `--property` pair."""
    return metadata_change(
        args.display_name, args.comment, parse_properties(args.property), getattr(args, "unset", None)
    )


def _properties_text(entry: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted((entry.get("properties") or {}).items()))


def print_metadata(entry: dict[str, Any]) -> None:
    """`share info`'s lines of a share's metadata: only what is set; a comment's lines indented."""
    if entry.get("displayName"):
        print(f"display name: {entry['displayName']}")
    if entry.get("comment"):
        print("comment: " + entry["comment"].replace("\n", "\n  "))
    if entry.get("properties"):
        print(f"properties: {_properties_text(entry)}")


def listed_metadata(entry: dict[str, Any]) -> str:
    """What `share list` adds to a share's line (tab-separated, only what is set)."""
    parts = []
    if entry.get("displayName"):
        parts.append(f"display name: {entry['displayName']}")
    if entry.get("comment"):
        first = entry["comment"].split("\n", 1)[0]
        cut = len(first) > LISTED_COMMENT or "\n" in entry["comment"]
        parts.append(f"comment: {first[:LISTED_COMMENT]}{'...' if cut else ''}")
    if entry.get("properties"):
        parts.append(f"properties: {_properties_text(entry)}")
    return "".join(f"\t{part}" for part in parts)
