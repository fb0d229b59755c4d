"""Directory access (the Delta Sharing protocol of 2026-02): a table read as a folder, with keys.

A recipient's engine reads a `dir` table with its own Delta reader, straight from the table's
folder, with temporary keys this server vends (`POST .../temporary-table-credentials`); every
table is read by `url` too (the signed URLs of `/query`). Reading the folder reads all of it,
so a table is `dir` only when nothing in the folder is kept from the recipient and the store
itself bounds the keys:

* its storage is S3 with STS vending on (`[iceberg] credential_vending = "sts"`, the same
  session-policy machinery as `/iceberg`'s vended keys, `storage/sts_vending.py`);
* its history is shared: the folder holds every version, and its log names every file ever;
* it is not restricted: a table served as part of its rows or columns is never read whole;
* it is a Delta table: an Iceberg table's engines read it through `/iceberg`.

`table_access` decides (pure: the table, whether storage is S3, whether it vends); the keys it
allows read only (GetObject, ListBucket under the prefix) the table's folder or a folder under
it (`TableAccess.scope`). `DirectoryAccess` asks the store's STS for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from share_store.errors import Forbidden, InvalidParameter, ShareStoreError, UnsupportedOperation
from share_store.model import SharedTable
from share_store.signing.vended_scope import VendingScope
from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Storage
from share_store.storage.sts_vending import CredentialVendor, VendedKeys

URL, DIR = "url", "dir"
SCHEME = "s3://"
#: A location asked for is at most this long (S3 keys are at most 1,024 bytes).
MAX_LOCATION_CHARS = 1024
#: A folder's name under the table's, as a location asked for may name it. Strict on purpose:
#: no `%` (an encoded `/` or `..` is another key to S3 than to a reader that decodes it), no
#: `*`, `?` or `$` (wildcards and variables in the session policy the folder becomes).
FOLDER = re.compile(r"[A-Za-z0-9_=+-][A-Za-z0-9_.=+-]*")
#: What the session policy reads as a wildcard or a variable, never in a table's prefix.
POLICY_SPECIALS = re.compile(r"[*?$]")

NO_HISTORY = "its history is not shared (its folder holds every version)"
RESTRICTED = "it is restricted to part of its rows or columns"
NO_STS = "its storage has no temporary credentials (STS)"
ICEBERG = "it is an Iceberg table: its engines read it through the Iceberg REST catalog at /iceberg"
WILDCARDS = "its location holds characters a session policy takes for wildcards"
#: The reasons that are the provider's choice (403); the others are what the server cannot do (400).
POLICY_REASONS = (NO_HISTORY, RESTRICTED)


def table_format(table: SharedTable) -> str:
    """OpenSharing's `format` of a shared table: `delta` or `iceberg`."""
    return "iceberg" if table.is_iceberg else "delta"


@dataclass(frozen=True)
class TableAccess:
    """How one shared table may be read: by `url` always, by `dir` when nothing bars it."""

    table: str  # share.schema.name, for the refusal's text
    format: str
    bucket: str
    path: str
    #: Why the table is `url` only (empty: it is `dir` too).
    reasons: tuple[str, ...]

    @property
    def modes(self) -> tuple[str, ...]:
        return (URL,) if self.reasons else (URL, DIR)

    @property
    def location(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.path}"

    def item_fields(self) -> dict[str, Any]:
        """The table item's fields for directory access (and OpenSharing's `format`).

        A `url` only table's location is not told: it is no use to the recipient, and a
        restricted table's folder is the one thing its restriction keeps from it."""
        fields: dict[str, Any] = {"format": self.format, "accessModes": list(self.modes)}
        if not self.reasons:
            fields["location"] = self.location
            # A Delta table's files, deletion vectors included, are all under its location.
            fields["auxiliaryLocations"] = []
        return fields

    def refusal(self) -> ShareStoreError | None:
        """What a request for keys to a `url` only table answers (None: keys may be vended)."""
        if not self.reasons:
            return None
        message = f"table {self.table} is shared for URL access only: {'; '.join(self.reasons)}"
        if any(reason in POLICY_REASONS for reason in self.reasons):
            return Forbidden(message)
        return UnsupportedOperation(message)

    def scope(self, asked: str | None) -> tuple[str, VendingScope]:
        """The location keys are vended for (the table's, or `asked` if it is a folder under it) and
        what they may read: that folder, nothing else. Refused for a `url` only table."""
        refusal = self.refusal()
        if refusal is not None:
            raise refusal
        if asked is None or asked == self.location:
            return self.location, VendingScope(((self.bucket, self.path + "/"),))
        under = self._under(asked)
        if under is None:
            shown = asked[:200] + ("…" if len(asked) > 200 else "")
            raise InvalidParameter(
                f"location {shown!r} is not the table's location {self.location} or a folder under it "
                f"(s3://, no trailing '/', folder names of letters, digits and _.=+-)"
            )
        return asked, VendingScope(((self.bucket, f"{self.path}/{under}/"),))

    def _under(self, asked: str) -> str | None:
        """The folders `asked` names under the table's location, or None if it is not under it.

        Compared as text, never decoded or normalized: what is checked is what the policy says."""
        root = self.location + "/"
        if len(asked) > MAX_LOCATION_CHARS or not asked.startswith(root):
            return None
        under = asked[len(root) :]
        folders = under.split("/")
        if not all(FOLDER.fullmatch(folder) and folder not in (".", "..") for folder in folders):
            return None
        return under


def table_access(table: SharedTable, s3: bool, vends: bool) -> TableAccess:
    """How `table` may be read, where its storage is S3 (`s3`) and vends STS keys (`vends`)."""
    reasons: list[str] = []
    if table.is_iceberg:
        reasons.append(ICEBERG)
    if not (s3 and vends):
        reasons.append(NO_STS)
    if not table.history_shared:
        reasons.append(NO_HISTORY)
    if table.restriction is not None:
        reasons.append(RESTRICTED)
    path = table.path.strip("/")
    if POLICY_SPECIALS.search(table.bucket + path):
        reasons.append(WILDCARDS)
    return TableAccess(table.full_name, table_format(table), table.bucket, path, tuple(reasons))


@dataclass(frozen=True)
class TableCredentials:
    """Keys vended for a table's folder (or one under it), and the location they read."""

    location: str
    keys: VendedKeys


class DirectoryAccess:
    """Directory access for the server's storage: each table's `TableAccess`, and its keys."""

    def __init__(self, storage: ObjectStorage, vendor: CredentialVendor | None) -> None:
        self.storage = storage
        #: The recipients' vendor (`[iceberg] credential_vending`); None or off: no table is `dir`.
        self.vendor = vendor

    def of(self, table: SharedTable) -> TableAccess:
        vends = self.vendor is not None and self.vendor.settings.enabled
        return table_access(table, isinstance(self.storage, S3Storage), vends)

    def credentials(
        self, table: SharedTable, token_id: str, not_after: float | None, asked: str | None
    ) -> TableCredentials:
        """Read-only keys to `table`'s folder (or `asked`, under it), ending no later than
        `not_after` (the token's expiry) nor the vendor's `credential_duration`."""
        location, scope = self.of(table).scope(asked)
        assert self.vendor is not None and isinstance(self.storage, S3Storage)
        # Who asked for what, as the store's audit shows the session (64 characters at most).
        session = f"dir-{token_id[:24]}-{table.id[:24]}"
        keys = self.vendor.vend(self.storage.settings, scope, session, not_after)
        return TableCredentials(location, keys)
