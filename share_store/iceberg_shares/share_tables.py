"""A share's namespaces and tables as the recipients' Iceberg REST catalog serves them, and which
of its tables signs a read.

The share is a token's (the handlers authenticate it; `opened_shares.py` says which share, and for
whom its tables are read: `audience`, a share's own token's unless said); its schemas are the
catalog's namespaces, one level each. Tables are found through the store, as the Delta Sharing
protocol finds them (`ShareStore`), and their files through their grants (`grants.IcebergGrants`, over
`TableReaders`), so both protocols refuse alike: `NotFound` for a schema or table the share does
not hold, `SigningRefused` for a request no table's grant signs.
"""

from __future__ import annotations

import logging
from typing import Any

from share_store.errors import MalformedRequest, NotFound
from share_store.iceberg_shares.grants import IcebergGrants, TableGrant
from share_store.model import SharedTable
from share_store.persistence import ShareStore
from share_store.restrictions.restriction import Audience
from share_store.signing.request_signing import SigningRefused

log = logging.getLogger(__name__)

#: Whom `/iceberg` reads a table for at the URLs that name no share: a share's own token, the only
#: token they take, which has no recipient (a named recipient reads at its shares' URLs, for
#: itself). A restriction naming no recipient property is served to it; one naming
#: `CURRENT_RECIPIENT` is refused, naming the property (`restriction.bind`).
SHARE_TOKEN = Audience()


class ShareTables:
    """The tables of a share, by the store and the tables' grants."""

    def __init__(self, store: ShareStore, grants: IcebergGrants) -> None:
        self.store = store
        self.grants = grants

    def namespaces(self, share: str, parent: str | None = None) -> list[str]:
        """The share's schemas; below `parent` (one of them), none: a schema has no namespaces."""
        schemas = self.store.list_schemas(share)
        if parent is None:
            return schemas
        if parent not in schemas:
            raise NotFound(f"Namespace does not exist: {parent}")
        return []

    def namespace(self, share: str, name: str) -> str:
        """`name`, if the share has that schema."""
        if name not in self.store.list_schemas(share):
            raise NotFound(f"Namespace does not exist: {name}")
        return name

    def tables(self, share: str, schema: str, audience: Audience = SHARE_TOKEN) -> list[SharedTable]:
        """The tables of one of the share's schemas, read for `audience`."""
        return self.store.list_tables(share, self.namespace(share, schema), audience=audience)

    def table(self, share: str, schema: str, name: str, audience: Audience = SHARE_TOKEN) -> SharedTable:
        """The table `schema.name`, if the share holds it, read for `audience`."""
        try:
            return self.store.get_table(share, schema, name, audience=audience)
        except NotFound:
            raise NotFound(f"Table does not exist: {schema}.{name}") from None

    def grant_to_vend(self, table: SharedTable) -> TableGrant:
        """A fresh grant of `table` to vend keys for (the spec's credentials refresh); refused when
        the server vends none."""
        if not self.grants.vends:
            raise MalformedRequest(
                'this server vends no credentials ([iceberg] credential_vending = "off"); use remote signing'
            )
        return self.grants.load(table)

    def sign(
        self,
        share: str,
        method: str,
        uri: str,
        headers: dict[str, list[str]],
        notes: dict[str, Any],
        audience: Audience = SHARE_TOKEN,
    ) -> tuple[str, dict[str, list[str]]]:
        """The URI to send and its signed headers, if an Iceberg table of the share may be read at
        `uri` by `audience` (the URI is the request the signer built, not the client's); what was
        signed, or why not, noted for the audit. `SigningRefused` when no table's grant allows it."""
        return self._signed_by(self.store.list_tables(share, audience=audience), method, uri, headers, notes)

    def sign_table(
        self,
        table: SharedTable,
        method: str,
        uri: str,
        headers: dict[str, list[str]],
        notes: dict[str, Any],
    ) -> tuple[str, dict[str, list[str]]]:
        """`sign` for one table of the share, read for its audience (`table`): the spec's signer
        (`.../tables/{t}/sign`), which names the table in its path."""
        return self._signed_by([table], method, uri, headers, notes)

    def _signed_by(
        self,
        tables: list[SharedTable],
        method: str,
        uri: str,
        headers: dict[str, list[str]],
        notes: dict[str, Any],
    ) -> tuple[str, dict[str, list[str]]]:
        """The signature of the first of `tables` whose grant allows the read."""
        refusal = "not a file of the share's tables"
        failed: Exception | None = None
        # What each table's kept grant allows first; a fresh look only when none does.
        for table, recheck in [(t, False) for t in tables] + [(t, True) for t in tables]:
            try:
                signed = self.grants.signature(table, method, uri, headers, recheck)
            except SigningRefused as error:  # not a read at this table's store; maybe another's
                refusal = str(error)
                continue
            except Exception as error:  # noqa: BLE001 - one table's broken files (a manifest list its
                # writer deleted) must not stop its neighbours' reads: the next table is asked, and
                # the failure is answered only if no table signs.
                log.warning("signing skipped table %s.%s: %s", table.schema, table.name, type(error).__name__)
                failed = failed or error
                continue
            if signed is not None:
                request, signature = signed
                notes.update(
                    schema=table.schema,
                    table=table.name,
                    signing={"method": request.method, "object": f"{request.bucket}/{request.key}"},
                )
                return request.uri, signature
        if failed is not None:
            raise failed
        notes["signing"] = {"method": method, "refused": refusal}
        raise SigningRefused(f"this token may not have that request signed: {refusal}")
