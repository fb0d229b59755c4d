"""The share model: share → schema → table, tokens, and the admin spec grammar.

Names are matched case-insensitively (as the reference server does) but kept
as the provider typed them. Table specs follow MinIO AIStor's `mc table share`
grammar so that its users can reuse their commands:

    NAME:delta:BUCKET:PATH                 (after a SCHEMA argument)
    SCHEMA:NAME:delta:BUCKET:PATH          (`share update --add`)
    SCHEMA:NAME:uniform:WAREHOUSE:NAMESPACE:TABLE

A Delta table lives at BUCKET/PATH of the configured storage; an Iceberg
table is kept as `bucket` = WAREHOUSE (a configured catalog) and `path` =
NAMESPACE/TABLE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from posixpath import normpath

from share_store.errors import AdminError
from share_store.restrictions.restriction import Audience, TableRestriction

# Patterns are matched whole (`fullmatch`): `$` would also accept a trailing newline.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,127}")
# S3's bucket rules; for local storage a bucket is a directory, and the same
# rule keeps it from being "..", absolute, or nested.
BUCKET_PATTERN = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def validate_name(kind: str, name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise AdminError(f"invalid {kind} name {name!r}: use letters, digits, '_' and '-' (at most 128)")
    return name


def validate_bucket(bucket: str) -> str:
    if not BUCKET_PATTERN.fullmatch(bucket) or ".." in bucket:
        raise AdminError(f"invalid bucket name {bucket!r}: 3-63 of a-z, 0-9, '.', '-'")
    return bucket


WAREHOUSE_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")


def validate_warehouse(name: str) -> str:
    if not WAREHOUSE_PATTERN.fullmatch(name) or ".." in name:
        raise AdminError(f"invalid warehouse name {name!r}: letters, digits, '_', '-', '.' (at most 63)")
    return name


def validate_namespace(namespace: str) -> str:
    """An Iceberg namespace; levels are separated by dots (`db.sub`)."""
    for level in namespace.split("."):
        validate_name("namespace", level)
    return namespace


def validate_table_path(path: str) -> str:
    cleaned = path.strip("/")
    if (
        not cleaned
        or "\\" in cleaned
        or "\x00" in cleaned
        or any(part in ("", ".", "..") for part in cleaned.split("/"))
        or normpath(cleaned) != cleaned
    ):
        raise AdminError(f"invalid table path {path!r}: a relative path inside the bucket")
    return cleaned


@dataclass(frozen=True)
class TableSpec:
    """What an admin asks to share: a table name in a schema and where it lives."""

    schema: str
    name: str
    format: str
    bucket: str
    path: str

    @classmethod
    def parse(cls, spec: str, schema: str | None = None) -> TableSpec:
        """Parse `NAME:delta:BUCKET:PATH` (with `schema`) or `SCHEMA:NAME:delta:BUCKET:PATH`."""
        parts = spec.split(":")
        if schema is None:
            if len(parts) < 2:
                raise AdminError(f"invalid table spec {spec!r}: expected SCHEMA:NAME:delta:BUCKET:PATH")
            schema, parts = parts[0], parts[1:]
        if len(parts) >= 2 and parts[1] == "uniform":
            if len(parts) != 5:
                raise AdminError(
                    f"invalid table spec {spec!r}: expected NAME:uniform:WAREHOUSE:NAMESPACE:TABLE"
                    " (SCHEMA:NAME:uniform:WAREHOUSE:NAMESPACE:TABLE with --add)"
                )
            name, _, warehouse, namespace, table = parts
            return cls(
                schema=validate_name("schema", schema),
                name=validate_name("table", name),
                format="uniform",
                bucket=validate_warehouse(warehouse),
                path=f"{validate_namespace(namespace)}/{validate_name('Iceberg table', table)}",
            )
        if len(parts) < 4 or parts[1] != "delta":
            raise AdminError(
                f"invalid table spec {spec!r}: expected NAME:delta:BUCKET:PATH"
                " (SCHEMA:NAME:delta:BUCKET:PATH with --add)"
            )
        name, fmt, bucket, path = parts[0], parts[1], parts[2], ":".join(parts[3:])
        return cls(
            schema=validate_name("schema", schema),
            name=validate_name("table", name),
            format=fmt,
            bucket=validate_bucket(bucket),
            path=validate_table_path(path),
        )


def parse_table_ref(ref: str) -> tuple[str, str]:
    """Parse `SCHEMA/NAME` (the `--remove` argument)."""
    schema, sep, name = ref.partition("/")
    if not sep or not schema or not name or "/" in name:
        raise AdminError(f"invalid table reference {ref!r}: expected SCHEMA/NAME")
    return schema, name


def parse_create_args(args: list[str]) -> list[TableSpec]:
    """`SCHEMA spec spec SCHEMA2 spec …`: a word without ':' starts a schema."""
    specs: list[TableSpec] = []
    schema: str | None = None
    for arg in args:
        if ":" not in arg:
            schema = validate_name("schema", arg)
            continue
        if schema is None:
            raise AdminError(f"table spec {arg!r} must follow a SCHEMA argument")
        specs.append(TableSpec.parse(arg, schema))
    return specs


@dataclass(frozen=True)
class Share:
    id: str
    name: str
    created_at: datetime
    #: The 2026-02 protocol's share metadata (`persistence/share_metadata.py` holds its limits);
    #: None and {} for what is not set, which /shares then leaves out.
    display_name: str | None = None
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Recipient:
    id: str
    name: str
    created_at: datetime
    shares: tuple[str, ...] = ()
    #: What `CURRENT_RECIPIENT('key')` reads in a restricted table's row filter.
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SharedTable:
    id: str
    share: str
    schema: str
    name: str
    format: str
    bucket: str
    path: str
    history_shared: bool
    created_at: datetime
    #: The rows and columns served, where the provider restricted the table (None: all of it).
    restriction: TableRestriction | None = None
    #: Who the table is read for, set when a recipient's token authorized it; a restricted
    #: table is served only with one (`TableReaders.reader`), so none is served unrestricted.
    audience: Audience | None = None

    @property
    def full_name(self) -> str:
        return f"{self.share}.{self.schema}.{self.name}"

    @property
    def is_iceberg(self) -> bool:
        return self.format == "uniform"

    @property
    def iceberg_identifier(self) -> tuple[str, str, tuple[str, ...]]:
        """(warehouse, table name, namespace levels) of an Iceberg table."""
        namespace, _, table = self.path.rpartition("/")
        return self.bucket, table, tuple(namespace.split("."))


class Expiring:
    """A credential that can be revoked and may expire."""

    revoked_at: datetime | None
    expires_at: datetime | None

    def is_active(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True)
class Token(Expiring):
    id: str
    share_id: str
    share: str
    description: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None = None
    # Set on access tokens issued to an OAuth client.
    oauth_client_id: str | None = None
    # Set once the token was rotated: it lives on until `expires_at`, its grace period.
    replaced_by: str | None = None
    # Set on a named recipient's token, which opens every share granted to the recipient
    # (`share_id` and `share` are then "").
    recipient_id: str | None = None


@dataclass(frozen=True)
class OAuthClient(Expiring):
    """A recipient's OAuth2 client: exchanges its id and secret for access tokens to one share."""

    id: str
    share_id: str
    share: str
    description: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None = None
