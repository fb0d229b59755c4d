"""How a recipient's engine reads a table's files: remote signing or vended keys.

The Iceberg REST spec's `X-Iceberg-Access-Delegation` header lists what a client
can do (`vended-credentials`, `remote-signing`). pyiceberg signs through this
server; DuckDB, Trino and most engines need keys. With `[iceberg]
credential_vending = "sts"`, a client that lists `vended-credentials` gets keys
scoped to the table (`share_store/storage/sts_vending.py`); every other answer,
and every answer with vending off, points the client at this server's signer.
The modes and the properties handed out are the writers' too
(`share_store.signing.delegation`); here are what only a recipient's answer has:
its signer's address, the audit line and the metrics.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from starlette.requests import Request

from share_store.iceberg_shares.grants import IcebergGrants, TableGrant
from share_store.model import SharedTable, Token
from share_store.signing.delegation import VENDED, chosen_mode, remote_signing_config, vended_config
from share_store.storage.sts_vending import VendedKeys
from sharing_server import paths
from sharing_server.http.access_delegation import asked_modes
from sharing_server.observability.audit import audit_fields
from sharing_server.observability.metrics import Metrics


def signing_config(request: Request, endpoint: str, signer: str = paths.ICEBERG_S3_SIGN) -> dict[str, str]:
    """How a client reads the table's files: through the store, signed by this server at `signer`
    (the share's own, for the URLs that name the share)."""
    catalog_uri = str(request.base_url).rstrip("/") + paths.ICEBERG_PREFIX
    return remote_signing_config(catalog_uri, signer.lstrip("/"), endpoint)


def vend(
    request: Request,
    metrics: Metrics,
    grants: IcebergGrants,
    table: SharedTable,
    token: Token,
    grant: TableGrant,
) -> VendedKeys:
    """Keys for `grant`, ending no later than the token; an audit line and a metric either way."""
    not_after = token.expires_at.astimezone(UTC).timestamp() if token.expires_at else None
    try:
        keys = grants.vended_keys(table, grant, token.id, not_after)
    except Exception:
        metrics.iceberg_vended.labels("refused").inc()
        raise
    metrics.iceberg_vended.labels("vended").inc()
    audit_fields(request)["vended"] = {
        "scope": keys.scope.describe(),
        "expires": int(keys.expires_at),
        "key": keys.access_key[:8] + "…",  # enough to match the store's logs, never the secret
    }
    return keys


def storage_credentials(keys: VendedKeys, grant: TableGrant) -> list[dict[str, Any]]:
    """The spec's `storage-credentials`: the keys for each of the table's prefixes.

    One entry per prefix, since engines pick keys by the longest prefix of a file's
    path (DuckDB takes the table's location when there is one entry only). The
    session policy, not the prefix, is what bounds the keys.
    """
    return _vended(keys, grant)[1]


def _vended(keys: VendedKeys, grant: TableGrant) -> tuple[dict[str, str], list[dict[str, Any]]]:
    prefixes = sorted(set(grant.prefixes) | set(keys.scope.prefixes))
    return vended_config(keys.properties(grant.endpoint, grant.store.region), prefixes)


def read_access(
    request: Request,
    metrics: Metrics,
    grants: IcebergGrants,
    table: SharedTable,
    token: Token,
    grant: TableGrant,
    signer: str = paths.ICEBERG_S3_SIGN,
) -> dict[str, Any]:
    """The load-table answer's `config`, and `storage-credentials` when keys are vended; else
    signing at `signer`."""
    # Keys for a client that lists them anywhere, when vending is on and the grant may have keys
    # (`TableGrant.vendable`); signing for every other.
    vending = grants.vends and grant.vendable
    if chosen_mode(asked_modes(request.headers), (VENDED,) if vending else ()) == VENDED:
        config, credentials = _vended(vend(request, metrics, grants, table, token, grant), grant)
        return {"config": config, "storage-credentials": credentials}
    return {"config": signing_config(request, grant.endpoint, signer)}
