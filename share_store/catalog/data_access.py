"""How a writer's engine reaches an own-warehouse table's files with only the catalog's keys.

The Iceberg REST spec's `X-Iceberg-Access-Delegation` header lists what an
engine can do, the first mode on is the one it gets (`signing.delegation`, shared
with the recipients' catalog); the provider turns each mode on
(`[warehouses] access_delegation`):

* **vended-credentials**: keys from the store's STS (`AssumeRole`), whose
  session policy allows reading, writing and deleting only under the table's
  recorded location, and listing only under it (`signing.vended_scope`);
* **remote-signing**: the engine sends each S3 request to this server, which
  signs a request it builds itself (`signing.request_signing`) if it names one
  object under the table's location and the caller's policy allows it:
  `GET`/`HEAD` need `s3tables:GetTableData`, `PUT`/`DELETE`/multipart (and a copy,
  whose source must be the table's too) `s3tables:PutTableData`.

A signing grant names the table's uuid and location, and follows its table:
each signature looks the table up again under the grant's name and refuses when
it is gone, dropped, renamed away or replaced by another table (another uuid or
location), so a rename out of the caller's namespace ends the grant at once, as a
removed user or a narrowed policy does.

What a caller gets is what its policy allows on the table: a user allowed only
`GetTableData` gets read-only keys and read-only signatures. The location is the
catalog's (`table_locations`), never the caller's metadata; a staged create's
is the one handed out with it. The server's own keys never leave it. Off, a
table load carries no delegation (engines use keys of their own) and asking
for keys or signatures is refused with the setting to turn on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from share_store.catalog import policies as actions
from share_store.catalog.access import CatalogAccess, Principal
from share_store.catalog.catalog import LoadedTable, WarehouseCatalog
from share_store.catalog.errors import NoSuchTable
from share_store.catalog.names import TableName
from share_store.catalog.policies import table_arn
from share_store.errors import Forbidden, InvalidParameter, UnsupportedOperation
from share_store.signing.delegation import (
    ACCESS_MODES,
    SIGNED,
    VENDED,
    chosen_mode,
    remote_signing_config,
    vended_config,
)
from share_store.signing.request_signing import (
    READ_METHODS,
    HeaderSigner,
    SigningRefused,
    parse_object_request,
)
from share_store.signing.token_codec import TokenCodec
from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Settings
from share_store.storage.store_signer import store_signer
from share_store.storage.sts_vending import CredentialVendor, VendedKeys
from share_store.storage.table_keys import scoped_signer
from share_store.storage.table_location import TableLocation

SETTING = "[warehouses] access_delegation"
#: How long a signing grant handed out with a table load lasts; the engine loads again after.
GRANT_SECONDS = 3600


class DelegationOff(InvalidParameter):
    """A mode of access delegation the provider has not turned on."""


@dataclass(frozen=True)
class SignAsked:
    """One S3 request to sign for `who` on `table`, whose files are at `location`; `writes`: whether
    a write may be signed at all (a read-only grant's may not)."""

    who: Principal
    table: TableName
    location: TableLocation
    writes: bool
    method: str
    uri: str
    headers: dict[str, list[str]]
    #: A batch delete's body (the keys it deletes), as the signing request carries it.
    body: bytes | None = None


@dataclass(frozen=True)
class DataRights:
    """What a principal may do to a table's files, from its policy."""

    read: bool
    write: bool

    @classmethod
    def of(cls, who: Principal, table: TableName) -> DataRights:
        arn = table_arn(table.warehouse, table.namespace, table.name)
        return cls(who.allows(actions.GET_TABLE_DATA, arn), who.allows(actions.PUT_TABLE_DATA, arn))


class DataAccess:
    """The own warehouses' data access: vended keys and signed requests for a table's location."""

    def __init__(
        self,
        storage: ObjectStorage,
        modes: tuple[str, ...],
        vendor: CredentialVendor | None,
        codec: TokenCodec,
    ) -> None:
        unknown = sorted(set(modes) - set(ACCESS_MODES))
        if unknown:
            raise ValueError(f"access_delegation takes {', '.join(ACCESS_MODES)}, not {', '.join(unknown)}")
        self.storage = storage
        # The server's storage, its keys and address never change while it runs: looked up once.
        try:
            self._store: tuple[HeaderSigner, str, S3Settings] | None = store_signer(storage)
        except UnsupportedOperation:
            self._store = None
        self.modes = modes
        self.vendor = vendor
        self.codec = codec

    @property
    def vends(self) -> bool:
        return VENDED in self.modes and self.vendor is not None

    @property
    def signs(self) -> bool:
        return SIGNED in self.modes

    @property
    def offered(self) -> tuple[str, ...]:
        """The modes an engine may be given: those turned on that the server can serve."""
        return tuple(mode for mode, on in ((VENDED, self.vends), (SIGNED, self.signs)) if on)

    # -- what a table load carries --------------------------------------------------------

    def delegate(
        self,
        asked: Sequence[str],
        access: CatalogAccess,
        table: TableName,
        loaded: LoadedTable,
        signer_uri: str,
        notes: dict[str, Any],
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """`load_config` for a loaded (or staged) table, at its recorded location; noted for the audit."""
        if not asked or not self.modes:
            return {}, []
        location = loaded.location or access.catalog.table_location(table)
        staged = loaded.metadata_location is None
        config, credentials, noted = self.load_config(
            asked, access.who, table, location, signer_uri, (str(loaded.metadata.table_uuid), staged)
        )
        if noted:
            notes.update(noted)
        return config, credentials

    def load_config(
        self,
        asked: Sequence[str],
        who: Principal,
        table: TableName,
        location: TableLocation,
        signer_uri: str,
        identity: tuple[str, bool],
    ) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, Any] | None]:
        """The load result's `config` and `storage-credentials` for the modes `asked` lists and the
        provider turned on (the first that is, in the engine's order), and what the audit line
        notes; nothing when none is. `identity` is the table's uuid and whether it is only staged."""
        mode = chosen_mode(asked, self.offered)
        if mode == VENDED:
            keys = self.vended_keys(who, table, location)
            credentials = self.storage_credentials(keys, location)
            return credentials[0]["config"], credentials, {"vended": keys.scope.describe()}
        if mode == SIGNED:
            config = self.signing_config(who, table, location, signer_uri, identity)
            return config, [], {"signing": location.uri}
        return {}, [], None

    def refreshed(
        self, access: CatalogAccess, table: TableName, loaded: LoadedTable, notes: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The spec's credentials refresh: fresh keys for a loaded table's location."""
        location = loaded.location or access.catalog.table_location(table)
        keys = self.vended_keys(access.who, table, location)
        notes["vended"] = keys.scope.describe()
        return self.storage_credentials(keys, location)

    def vended_keys(self, who: Principal, table: TableName, location: TableLocation) -> VendedKeys:
        if not self.vends:
            raise DelegationOff(f"this server vends no keys to writers: set {SETTING} to include {VENDED!r}")
        assert self.vendor is not None
        rights = self._rights(who, table)
        _, _, store = self._s3()
        scope = location.vending_scope(rights.write)
        session = f"catalog-{who.name[:24]}-{table.name[:24]}"
        return self.vendor.vend(store, scope, session, None)

    def storage_credentials(self, keys: VendedKeys, location: TableLocation) -> list[dict[str, Any]]:
        """The spec's `storage-credentials`: the keys for the table's location."""
        _, endpoint, store = self._s3()
        prefix = (location.bucket, location.prefix.rstrip("/") + "/")
        return vended_config(keys.properties(endpoint, store.region), [prefix])[1]

    def signing_config(
        self,
        who: Principal,
        table: TableName,
        location: TableLocation,
        signer_uri: str,
        identity: tuple[str, bool],
    ) -> dict[str, str]:
        """Where the engine has its S3 requests signed: a grant naming the caller, the table (its
        name, uuid, whether it is only staged) and its location, in the signer's path, so that
        each request is checked against them and against the table as it is then."""
        self.signing_on()
        rights = self._rights(who, table)
        _, endpoint, _ = self._s3()
        grant = self.codec.encode(
            {
                "p": who.name,
                "k": who.key or "",
                "w": table.warehouse,
                "n": list(table.namespace),
                "t": table.name,
                "u": identity[0],
                "s": 1 if identity[1] else 0,
                "b": location.bucket,
                "l": location.prefix,
                "m": "rw" if rights.write else "r",
                "e": int(time.time()) + GRANT_SECONDS,
            }
        )
        return remote_signing_config(signer_uri, f"v1/{table.warehouse}/s3-sign/{grant}", endpoint)

    # -- the signer -----------------------------------------------------------------------

    def sign(
        self,
        warehouse: str,
        grant: str,
        principal_of: Any,
        catalog: WarehouseCatalog,
        method: str,
        uri: str,
        headers: dict[str, list[str]],
        notes: dict[str, Any],
        body: bytes | None = None,
    ) -> tuple[str, dict[str, list[str]]]:
        """The URI to send and the headers that sign it, for one S3 request of an engine holding
        `grant`, if the request names objects under the grant's location, the principal still may
        (`principal_of(key)` answers it from the store now: a removed user, or a narrowed policy,
        stops signing) and the grant's table is still the one under its name in `catalog`."""
        self.signing_on()
        try:
            payload = self.codec.decode(grant)
        except ValueError:
            raise Forbidden("this signing grant is not one of this server's") from None
        if payload.get("w") != warehouse or int(payload.get("e", 0)) < time.time():
            raise Forbidden(
                "this signing grant has expired or is for another warehouse: load the table again"
            )
        who: Principal | None = principal_of(str(payload.get("k", "")))
        if who is None:
            raise Forbidden("the signing grant's user no longer exists")
        table = TableName.of(warehouse, payload["n"], payload["t"])
        granted = _granted_location(payload)
        return self._decide(
            SignAsked(who, table, granted, payload.get("m") == "rw", method, uri, headers, body),
            notes,
            lambda: _still_the_grants(catalog, table, granted, payload),
        )

    def sign_table(
        self,
        access: CatalogAccess,
        table: TableName,
        method: str,
        uri: str,
        headers: dict[str, list[str]],
        notes: dict[str, Any],
        body: bytes | None = None,
    ) -> tuple[str, dict[str, list[str]]]:
        """The spec's signer (`POST .../tables/{t}/sign`, Iceberg 1.11): the caller authenticated by
        the catalog now, the table by the path, its location the catalog's (`NoSuchTable` when there
        is none: a staged create signs through the grant handed out with it). The same decision as
        `sign`, on the caller's policy as it is now."""
        self.signing_on()
        location = access.catalog.table_location(table)
        return self._decide(SignAsked(access.who, table, location, True, method, uri, headers, body), notes)

    def _decide(
        self, asked: SignAsked, notes: dict[str, Any], still: Callable[[], None] | None = None
    ) -> tuple[str, dict[str, list[str]]]:
        """The URI and headers that sign `asked`, if it names objects under its location only and
        its principal may do it there (a write also needs `asked.writes`, what a grant says); `still`
        checks, last, that the table is still the one asked for."""
        who, table, granted = asked.who, asked.table, asked.location
        rights = DataRights.of(who, table)
        _, endpoint, _ = self._s3()
        try:
            request = parse_object_request(
                asked.method, asked.uri, asked.headers, endpoint, writes=True, body=asked.body
            )
        except SigningRefused as error:
            raise Forbidden(f"not signed: {error}") from None
        notes["signing"] = {"method": request.method, "object": f"{request.bucket}/{request.key}"}
        if request.batch:
            notes["signing"]["deletes"] = len(request.batch)
        if request.copy_source is not None:
            notes["signing"]["copy"] = "/".join(request.copy_source)
        for bucket, key in request.objects():
            if not granted.holds(bucket, key):
                raise Forbidden(f"not signed: {bucket}/{key} is outside the table's location")
        reads = request.method in READ_METHODS
        if not (rights.read if reads else rights.write and asked.writes):
            needed = actions.GET_TABLE_DATA if reads else actions.PUT_TABLE_DATA
            raise Forbidden(f"{who.name} is not allowed to {needed} on {table}")
        if still is not None:
            still()
        return request.uri, self._signer(table, granted, reads).sign(request)

    def signing_on(self) -> None:
        """Refused with the setting to turn on while the provider signs no writers' requests."""
        if not self.signs:
            raise DelegationOff(
                f"this server signs no writers' requests: set {SETTING} to include {SIGNED!r}"
            )

    def _signer(self, table: TableName, granted: TableLocation, reads: bool) -> HeaderSigner:
        """What signs for a grant: where the store has STS (vending on), keys from `AssumeRole`
        whose session policy is the grant's location, read-only for a read, so that the store, not
        only the checks above, bounds what a signature reaches; else the server's own keys."""
        signer, _, store = self._s3()
        scope = granted.vending_scope(not reads)
        # One session per table and kind of right, so the store's audit names what signed.
        session = f"signer-{'r' if reads else 'w'}-{table.warehouse[:16]}-{table.name[:32]}"
        return scoped_signer(signer, self.vendor if self.vends else None, store, scope, session)

    def _rights(self, who: Principal, table: TableName) -> DataRights:
        rights = DataRights.of(who, table)
        if not rights.read:
            raise Forbidden(f"{who.name} is not allowed to {actions.GET_TABLE_DATA} on {table}")
        self._s3()
        return rights

    def _s3(self) -> tuple[HeaderSigner, str, S3Settings]:
        """The store's signer, address and settings; refused on storage that has no STS or signer."""
        if self._store is None:
            raise UnsupportedOperation(
                "access delegation needs S3 storage with static keys: local storage has no STS or signer"
            )
        return self._store


def _granted_location(payload: dict[str, Any]) -> TableLocation:
    """The table location a signing grant names: every object it signs is inside it (`holds`)."""
    bucket, prefix = str(payload.get("b")), str(payload.get("l")).strip("/")
    return TableLocation(f"s3://{bucket}/{prefix}", bucket, prefix)


def _still_the_grants(
    catalog: WarehouseCatalog, table: TableName, granted: TableLocation, payload: dict[str, Any]
) -> None:
    """Refused unless the table under the grant's name is the grant's: same uuid, same location.

    A staged create's grant signs while no table has the name yet (its files are written
    before the create is committed) as long as no table claims its location, and for the
    table its commit made after.
    """
    try:
        now = catalog.load_table(table)
    except NoSuchTable:
        if payload.get("s"):
            with catalog.transactions.read() as conn:
                claimed = catalog.locations.others(conn, table.warehouse)
            if not any(other.overlaps(granted) for other in claimed):
                return
        raise Forbidden(
            f"not signed: {table} no longer exists under this grant's name (dropped or renamed): "
            "load the table again"
        ) from None
    location = now.location
    same_place = location is None or (
        location.bucket == granted.bucket and location.prefix.strip("/") == granted.prefix
    )
    if str(now.metadata.table_uuid) != payload.get("u") or not same_place:
        raise Forbidden(f"not signed: {table} is another table now than this grant's: load the table again")
