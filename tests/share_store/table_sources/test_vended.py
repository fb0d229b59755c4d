"""Credentials a REST catalog vends with a table: told apart from the configured keys, and capping URLs."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

from share_store.table_sources.registry import CatalogRegistry
from share_store.table_sources.vended import REFRESH_MARGIN, vended_credentials

CONFIGURED = {
    "uri": "https://catalog.example.com/iceberg",
    "s3.endpoint": "https://store.example.com",
    "s3.access-key-id": "configured",
    "s3.secret-access-key": "configured-secret",
}
VENDED = CONFIGURED | {
    "s3.access-key-id": "ASIAVENDED",
    "s3.secret-access-key": "vended-secret",
    "s3.session-token": "session-token",
}


def test_the_configured_keys_are_not_vended() -> None:
    assert vended_credentials(CONFIGURED, CONFIGURED) is None
    assert vended_credentials({"s3.endpoint": "https://store.example.com"}, {}) is None


def test_keys_the_table_came_with_are_vended_with_their_expiry() -> None:
    expires_ms = int(time.time() * 1000) + 900_000
    found = vended_credentials(VENDED | {"s3.session-token-expires-at-ms": str(expires_ms)}, CONFIGURED)
    assert found is not None
    assert (found.access_key, found.secret_key, found.session_token) == (
        "ASIAVENDED",
        "vended-secret",
        "session-token",
    )
    assert found.expires_at == expires_ms / 1000
    assert found.endpoint == "https://store.example.com" and found.path_style
    assert found.fresh(time.time()) and not found.fresh(found.expires_at - REFRESH_MARGIN + 1)


def test_a_session_token_alone_makes_keys_vended() -> None:
    assert vended_credentials(CONFIGURED | {"s3.session-token": "t"}, CONFIGURED) is not None


def test_signed_urls_carry_the_session_token_and_never_outlive_the_keys() -> None:
    registry = CatalogRegistry({"partner": dict(CONFIGURED)}, url_lifetime=3600)
    now = time.time()
    expires_at_ms = int((now + 600) * 1000)
    storage = registry.vended_storage(
        "partner", VENDED | {"s3.session-token-expires-at-ms": str(expires_at_ms)}
    )
    assert storage is not None
    url, expiry_ms = storage.url_signer(now)("bucket", "table/data/part-0.parquet")
    query = parse_qs(urlparse(url).query)
    assert query["X-Amz-Security-Token"] == ["session-token"]
    assert query["X-Amz-Credential"][0].startswith("ASIAVENDED/")
    assert 590 <= int(query["X-Amz-Expires"][0]) <= 600
    assert expiry_ms <= expires_at_ms
    # The same keys keep the same store; new ones make a new one.
    same = registry.vended_storage(
        "partner", VENDED | {"s3.session-token-expires-at-ms": str(expires_at_ms)}, storage
    )
    assert same is storage
    renewed = registry.vended_storage("partner", VENDED | {"s3.session-token": "renewed"}, storage)
    assert renewed is not None and renewed is not storage
    assert registry.vended_storage("partner", CONFIGURED, storage) is None


def test_a_glue_catalog_without_keys_signs_with_the_provider_chain_off_the_servers_store() -> None:
    glue = {"type": "glue", "glue.region": "us-east-1", "s3.endpoint": "https://elsewhere.example.com"}
    registry = CatalogRegistry({"glue": glue}, storage_endpoints=("https://store.example.com", None))
    storage = registry.storage("glue")
    assert storage is not None and storage.settings.access_key is None  # type: ignore[attr-defined]
    same_store = CatalogRegistry(
        {"glue": glue | {"s3.endpoint": "https://store.example.com"}},
        storage_endpoints=("https://store.example.com", None),
    )
    assert same_store.storage("glue") is None  # `[storage]`'s keys sign, as before
    sql = CatalogRegistry({"sql": {"type": "sql", "uri": "sqlite:///x.db"}})
    assert sql.storage("sql") is None
