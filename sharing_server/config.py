"""Server configuration: one TOML file, overridden by `SHARING_<SECTION>_<KEY>` variables.

[server]   host, port, prefix, public_url, data_dir, url_lifetime, secret_key,
           certfile, keyfile, workers, audit_log (a file, "-" for stdout, or "off"),
           proxy_hops (trusted proxies that set X-Forwarded-For/-Proto; default 0),
           prefer_delta_format (answer delta to clients offering `delta,parquet`; default true)
[admin]    token_hash (SHA-256 hex of the admin API's bearer token; unset: API and console off),
           max_token_lifetime (no token or OAuth client lasts longer; default 365d, "never": no bound)
[console]  session_idle_minutes (a console session ends after this long unused; default 30),
           activity_retention_hours, activity_max_events (recipients' requests kept in
           the store for the Activity page; default 168 h and 100,000; 0 keeps none)
[limits]   per_token_rps, global_rps (0 turns a limit off), admin_rps (the admin token's own,
           outside global_rps; default 1000), max_body_bytes,
           max_hint_nodes, hint_budget_ms (CPU per 10,000 files; 0: none),
           body_timeout, stream_send_timeout, keep_alive_timeout (an idle connection's, 75 s),
           stream_buffer_bytes,
           streams_per_token, streams_per_process (0 turns a cap off),
           scan_plan_budget (seconds a scan plan takes before a client that polls is told
           `submitted`; default 10)
[oauth]    access_token_lifetime (seconds)
[iceberg]  cache_bucket, cache_prefix (where derived deletion vector and data files
           go), inline_dv_bytes, deletes_in_parquet ("refuse" or "materialize"),
           equality_delete_budget_seconds (how long resolving one snapshot's
           equality deletes may take before it is refused; default 30),
           delta_snapshots (a Delta table's newest versions shown as snapshots
           to Iceberg REST clients; default 10), credential_vending ("off" or
           "sts": keys scoped to a table for engines that ask), credential_role_arn,
           credential_sts_endpoint (default: the store's), credential_duration (900)
[warehouses]  access_delegation: how writers' engines reach the own warehouses' files with only
           the catalog's keys: "vended-credentials" (STS keys for the table's location, with
           [iceberg]'s credential_role_arn, credential_sts_endpoint and credential_duration)
           and/or "remote-signing" (this server signs each request); none by default;
           idempotency_key_minutes: how long an Idempotency-Key of /_iceberg's mutations
           answers its retries, advertised in /v1/config (default 30; 0: keys not served)
[maintenance]  the server's own maintenance of the own warehouses' tables (compaction,
           snapshot expiry, unreferenced-file removal, as each table is configured):
           background (default true), interval_seconds (between rounds, and between two
           runs on a table being written; default 60), cpu_share (of one core; default
           0.25), period_hours (every table is kept at least this often; default 24);
           what a run may cost and how many run at once, whatever a table says (docs/production.md):
           row_group_decoded_mb (256), file_decoded_mb (4096), run_cpu_seconds (300),
           run_seconds (900), runs_at_once (1), runs_per_caller (2), runs_waiting (16),
           wait_seconds (60)
[cache]    snapshot_files (files held in cached snapshots, all tables together),
           files_check_seconds (how long a check that a version's files exist holds),
           warm_on_start (build the snapshots of the tables read in the last
           warm_window_hours, default 24, in the background at start; default true),
           refresh_seconds (how often tables read in the last minute are brought up to
           their latest version; default 1, 0: never)
[store]    url (any SQLAlchemy URL; default SQLite in data_dir)
[catalogs.NAME]  an Iceberg catalog: pyiceberg's properties and our `sharing.*`
           (share_store/table_sources/settings.py), or the documented grammar's
           backend, auth and storage (grammar.py), each block checked when read
[catalog]  the legacy single unnamed catalog: only empty values, as the documented
           multi-catalog example keeps it (`catalog_url = ""`), and then ignored
[query]    default_catalog: taken and ignored (every table spec names its WAREHOUSE)
[storage]  type = "local": root (subdirectories are buckets)
           type = "s3": endpoint, public_endpoint, region, access_key,
                        secret_key, session_token, path_style, connect_timeout,
                        read_timeout, max_attempts (the server's own reads only)
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from share_store.persistence import sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage import LocalStorage, ObjectStorage, S3Storage
from share_store.storage.s3 import S3Settings
from share_store.table_sources.registry import CatalogRegistry
from sharing_server import paths
from sharing_server.config_sections import (
    SECTION_KEYS,
    SERVER_KEYS,
    STORAGE_KEYS,
    parse_bool,
    read_catalogs,
    read_legacy_catalog,
    read_query,
    read_section,
)
from sharing_server.http.errors import ConfigError
from sharing_server.service_options import ServiceOptions, read_options

#: The configuration file's path, for worker processes and the CLI.
CONFIG_VARIABLE = "SHARING_CONFIG"
DEFAULT_CATALOG = "default"


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    prefix: str = "/delta-sharing"
    public_url: str | None = None
    data_dir: Path = Path(".sharing")
    url_lifetime: int = 3600
    secret_key: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    workers: int = 1
    store_url: str | None = None
    storage: dict[str, Any] = field(default_factory=lambda: {"type": "local"})
    catalogs: dict[str, dict[str, Any]] = field(default_factory=dict)
    audit_log: str = "-"
    proxy_hops: int = 0
    prefer_delta_format: bool = True
    admin: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    oauth: dict[str, Any] = field(default_factory=dict)
    iceberg: dict[str, Any] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    console: dict[str, Any] = field(default_factory=dict)
    warehouses: dict[str, Any] = field(default_factory=dict)
    maintenance: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def options(self) -> ServiceOptions:
        """The settings the running app takes, checked once (by `load_config`)."""
        sections = {
            "admin": self.admin,
            "limits": self.limits,
            "oauth": self.oauth,
            "iceberg": self.iceberg,
            "cache": self.cache,
            "console": self.console,
            "warehouses": self.warehouses,
            "maintenance": self.maintenance,
        }
        return read_options(
            self.endpoint,
            sections,
            audit_log=self.audit_log,
            proxy_hops=self.proxy_hops,
            prefer_delta_format=self.prefer_delta_format,
            url_lifetime=self.url_lifetime,
        )

    @property
    def base_url(self) -> str:
        """Where recipients reach this server (profiles, local file URLs)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        scheme = "https" if self.certfile else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        return self.base_url + self.prefix

    def resolved_store_url(self) -> str:
        return self.store_url or sqlite_url(self.data_dir / "store.db")

    @property
    def key_file(self) -> Path:
        """Where the server key is kept when `secret_key` is not set (made at first start)."""
        return self.data_dir / "server.key"

    @property
    def is_local(self) -> bool:
        return self.storage.get("type", "local") == "local"

    def storage_root(self) -> Path:
        return Path(self.storage.get("root") or self.data_dir / "data")

    @property
    def embedded_warehouse(self) -> Path | None:
        """The embedded Iceberg catalog's warehouse: local storage with no catalog configured."""
        if self.catalogs or not self.is_local:
            return None
        return self.storage_root().resolve() / "warehouse"

    def make_catalogs(self) -> CatalogRegistry:
        """Configured catalogs; with none, an embedded SQLite catalog named `default` (local storage)."""
        catalogs = dict(self.catalogs)
        warehouse = self.embedded_warehouse
        if warehouse is not None:
            catalogs[DEFAULT_CATALOG] = {
                "type": "sql",
                "uri": sqlite_url(self.data_dir.resolve() / "iceberg.db"),
                "warehouse": warehouse.as_uri(),
            }
        endpoints = (None, None)
        if self.storage.get("type") == "s3":
            endpoints = (self.storage.get("endpoint"), self.storage.get("public_endpoint"))
        return CatalogRegistry(catalogs, self.url_lifetime, endpoints)

    def make_storage(self, secret: bytes) -> ObjectStorage:
        """The configured storage; `secret` signs local file URLs."""
        kind = self.storage.get("type", "local")
        if kind == "local":
            signer = UrlSigner(secret, self.endpoint + paths.FILES)
            return LocalStorage(self.storage_root(), signer, self.url_lifetime)
        if kind == "s3":
            s = self.storage
            settings = S3Settings(
                endpoint=s.get("endpoint"),
                public_endpoint=s.get("public_endpoint"),
                region=s.get("region", "us-east-1"),
                access_key=s.get("access_key"),
                secret_key=s.get("secret_key"),
                session_token=s.get("session_token"),
                path_style=parse_bool(s.get("path_style", True)),
            )
            try:
                for key, kind in (("connect_timeout", float), ("read_timeout", float), ("max_attempts", int)):
                    if key in s:
                        setattr(settings, key, kind(s[key]))
            except ValueError as error:
                raise ConfigError(f"[storage] {error}") from error
            return S3Storage(settings, self.url_lifetime)
        raise ConfigError(f"unknown storage type {kind!r}: use 'local' or 's3'")


def load_config(
    path: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> ServerConfig:
    env = dict(os.environ if env is None else env)
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as handle:
                raw = tomllib.load(handle)
        except FileNotFoundError as error:
            raise ConfigError(f"config file {path} not found") from error
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"config file {path} is not valid TOML: {error}") from error
    server = read_section(raw, env, "server", SERVER_KEYS)
    store = read_section(raw, env, "store", ("url",), strict=False)
    storage = read_section(raw, env, "storage", STORAGE_KEYS, strict=False)
    sections = {name: read_section(raw, env, name, keys) for name, keys in SECTION_KEYS.items()}
    config = ServerConfig()
    for key, kind in SERVER_KEYS.items():
        if key in server:
            try:
                setattr(config, key, kind(server[key]))
            except ValueError as error:
                raise ConfigError(f"[server] {key}: {error}") from error
    if not config.prefix.startswith("/"):
        config.prefix = "/" + config.prefix
    config.prefix = config.prefix.rstrip("/")
    config.store_url = store.get("url")
    config.storage = {"type": "local", **storage}
    config.catalogs = read_catalogs(raw.get("catalogs", {}))
    read_legacy_catalog(raw.get("catalog"))
    read_query(raw.get("query"))
    config.admin, config.limits, config.oauth = sections["admin"], sections["limits"], sections["oauth"]
    config.iceberg = sections["iceberg"]
    config.cache = sections["cache"]
    config.console = sections["console"]
    config.warehouses = sections["warehouses"]
    config.maintenance = sections["maintenance"]
    config.options  # noqa: B018 - checks the values at load time, not at the first request
    return config
