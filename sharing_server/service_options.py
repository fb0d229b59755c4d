"""The settings the running app takes (`ServiceOptions`), read from the configuration's sections and checked.

`ServerConfig.options` makes them once, at load time, from the `[admin]`,
`[limits]`, `[oauth]`, `[iceberg]`, `[warehouses]`, `[maintenance]`, `[cache]`
and `[console]` sections and three `[server]` keys (`read_options`); a bad
value is a `ConfigError` naming its section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from share_store.catalog.maintenance.configuration import Limits
from share_store.catalog.maintenance.schedule import Background
from share_store.iceberg.plan_runs import SCAN_PLAN_BUDGET
from share_store.lifetimes import MAX_TOKEN_LIFETIME
from share_store.signing.url_lifetimes import LONGEST_SIGNABLE
from share_store.storage.sts_vending import VendingSettings
from share_store.tables.options import DeleteOptions
from share_store.tables.predicates import MAX_NODES
from share_store.tables.snapshot_cache import FILES_CHECK_SECONDS, SNAPSHOT_CACHE_FILES
from sharing_server.config_sections import (
    access_delegation,
    background_maintenance,
    delete_options,
    idempotency_key_minutes,
    maintenance_limits,
    max_token_lifetime,
    parse_bool,
    token_hash,
    vending_settings,
)
from sharing_server.delta_sharing.hint_filter import HintLimits
from sharing_server.http.errors import ConfigError

MIN_ACCESS_TOKEN_LIFETIME = 900
MIN_HINT_NODES = 3


@dataclass(frozen=True)
class ServiceOptions:
    """What the running app needs beyond its store and storage; defaults suit tests and demos."""

    endpoint: str = "http://127.0.0.1:8080/delta-sharing"
    admin_token_hash: str | None = None
    # No token or OAuth client may last longer (None: "never", no bound).
    max_token_lifetime: timedelta | None = MAX_TOKEN_LIFETIME
    # AIStor's defaults: 100 requests/s per token, 1000/s for the whole server.
    per_token_rps: float = 100.0
    # The admin token's own limit (admin API, CLI over it): provisioning scripts, not recipients.
    admin_rps: float = 1000.0
    global_rps: float = 1000.0
    max_body_bytes: int = 1024 * 1024
    # jsonPredicateHints: more nodes are refused; past the CPU budget a hint stops filtering.
    max_hint_nodes: int = MAX_NODES
    hint_budget_ms: float = HintLimits.budget_ms
    # Seconds for a request's whole body to arrive, counted from its head: a trickle is cut off.
    body_timeout: float = 30.0
    # Seconds a client may take to accept each chunk of a response before it is cut off.
    stream_send_timeout: float = 30.0
    # Seconds a connection may wait idle for its next request (and for a request's head) before
    # the server closes it. Longer than the pools of the clients in front (load balancers keep
    # 60 s): a server that closes first races a pooled client's next request on that connection,
    # which then cannot know whether a commit it sent was made. Hypercorn's own default is 5 s.
    keep_alive_timeout: float = 75.0
    # Bytes of a response made at a time, the next only once the client has taken
    # them: a stalled stream holds about three times this until it is cut off.
    # Smaller chunks cost CPU (a thread hop each): 32 KB takes 15% more than 64 KB.
    stream_buffer_bytes: int = 64 * 1024
    # /query and /changes responses streaming at once; 0 turns a cap off.
    streams_per_token: int = 16
    streams_per_process: int = 256
    # Clients renew 600 s before expiry, so an hour leaves them 50 minutes per token.
    access_token_lifetime: int = 3600
    audit_log: str = "off"
    # Proxies in front that append to X-Forwarded-For; their count says which address is the client.
    proxy_hops: int = 0
    iceberg: DeleteOptions = field(default_factory=DeleteOptions)
    vending: VendingSettings = field(default_factory=VendingSettings)
    # `[warehouses] access_delegation`: how writers' engines reach own tables' files with only the
    # catalog's keys ("vended-credentials", "remote-signing"); none by default.
    access_delegation: tuple[str, ...] = ()
    # `[warehouses] idempotency_key_minutes`: how long an `Idempotency-Key` of `/_iceberg` answers
    # its retries (advertised in /v1/config); 0: keys not served.
    idempotency_key_minutes: int = 30
    # `[maintenance]`: the server keeps its own warehouses' tables in the background.
    maintenance: Background = field(default_factory=Background)
    # `[maintenance]`'s limits on every run, asked for or background, whatever a table says.
    maintenance_limits: Limits = field(default_factory=Limits)
    snapshot_cache_files: int = SNAPSHOT_CACHE_FILES
    files_check_seconds: float = FILES_CHECK_SECONDS
    # Snapshots built before recipients ask (sharing_server/delta_sharing/warming.py).
    warm_on_start: bool = True
    refresh_seconds: float = 1.0
    # Tables read within this many hours before a start are the ones warmed at start.
    warm_window_hours: float = 24.0
    # The console: how long a session lasts unused, and how much activity the store keeps.
    console_idle_minutes: float = 30.0
    activity_retention_hours: float = 168.0
    activity_max_events: int = 100_000
    # Answer delta to clients that offer `delta,parquet`, for every table (docs/protocol.md).
    prefer_delta_format: bool = True
    # Seconds an async /query (`asyncquery=true`) may take to start its answer before the client
    # is told `pending` and polls: Spark's connector polls every 10 s.
    async_query_budget: float = 5.0
    # Seconds a scan plan of a client that polls (Java's, from Iceberg 1.11) may take before it is
    # told `submitted` and polls `GET …/plan/{plan-id}`: `share_store.iceberg.plan_runs`.
    scan_plan_budget: float = SCAN_PLAN_BUDGET
    # An answer's pre-signed URLs live `[server] url_lifetime` plus this much per file it hands
    # out, up to `url_lifetime_max` (and never past the token's expiry): `UrlLifetimes`.
    url_lifetime: int = 3600  # `[server] url_lifetime`: what every answer's URLs live at least
    url_lifetime_per_file_ms: float = 50.0
    url_lifetime_max: int = 6 * 3600


def read_options(
    endpoint: str,
    sections: Mapping[str, dict[str, Any]],
    *,
    audit_log: str,
    proxy_hops: int,
    prefer_delta_format: bool,
    url_lifetime: int = 3600,
) -> ServiceOptions:
    """The options of `sections` (by section name) and the `[server]` keys given, each checked."""
    defaults = ServiceOptions()
    limits, oauth, admin = sections["limits"], sections["oauth"], sections["admin"]

    def limit(key: str, kind: type[float] | type[int]) -> Any:
        return kind(limits.get(key, getattr(defaults, key)))

    try:
        options = ServiceOptions(
            endpoint=endpoint,
            admin_token_hash=token_hash(admin.get("token_hash")),
            max_token_lifetime=max_token_lifetime(admin.get("max_token_lifetime")),
            per_token_rps=limit("per_token_rps", float),
            admin_rps=limit("admin_rps", float),
            global_rps=limit("global_rps", float),
            max_body_bytes=limit("max_body_bytes", int),
            max_hint_nodes=limit("max_hint_nodes", int),
            hint_budget_ms=limit("hint_budget_ms", float),
            body_timeout=limit("body_timeout", float),
            stream_send_timeout=limit("stream_send_timeout", float),
            keep_alive_timeout=limit("keep_alive_timeout", float),
            stream_buffer_bytes=limit("stream_buffer_bytes", int),
            streams_per_token=limit("streams_per_token", int),
            streams_per_process=limit("streams_per_process", int),
            async_query_budget=limit("async_query_budget", float),
            scan_plan_budget=limit("scan_plan_budget", float),
            url_lifetime_per_file_ms=limit("url_lifetime_per_file_ms", float),
            url_lifetime_max=limit("url_lifetime_max", int),
            access_token_lifetime=int(oauth.get("access_token_lifetime", defaults.access_token_lifetime)),
            audit_log=audit_log,
            proxy_hops=proxy_hops,
            prefer_delta_format=prefer_delta_format,
            url_lifetime=url_lifetime,
            **_cache_options(sections["cache"], defaults),
            **_console_options(sections["console"], defaults),
        )
    except ValueError as error:
        raise ConfigError(f"invalid [limits]/[oauth] setting: {error}") from error
    iceberg = sections["iceberg"]
    options = dataclasses.replace(
        options,
        iceberg=delete_options(iceberg),
        vending=vending_settings(iceberg),
        access_delegation=access_delegation(sections["warehouses"]),
        idempotency_key_minutes=idempotency_key_minutes(sections["warehouses"]),
        maintenance=background_maintenance(sections["maintenance"]),
        maintenance_limits=maintenance_limits(sections["maintenance"]),
    )
    if options.access_token_lifetime < MIN_ACCESS_TOKEN_LIFETIME:
        # Clients renew tokens that expire within 600 s: a shorter lifetime
        # would have them fetch a new token before every request.
        raise ConfigError(f"[oauth] access_token_lifetime must be at least {MIN_ACCESS_TOKEN_LIFETIME} s")
    if options.max_body_bytes < 1024:
        raise ConfigError("[limits] max_body_bytes must be at least 1024")
    if options.max_hint_nodes < MIN_HINT_NODES:
        # A single comparison is three nodes (the op, a column and a literal).
        raise ConfigError(f"[limits] max_hint_nodes must be at least {MIN_HINT_NODES}")
    if not options.hint_budget_ms >= 0:  # NaN too
        raise ConfigError("[limits] hint_budget_ms must be 0 (no budget) or more")
    if not (options.body_timeout > 0 and options.stream_send_timeout > 0):  # NaN too
        raise ConfigError("[limits] body_timeout and stream_send_timeout must be above 0 seconds")
    if not 1 <= options.keep_alive_timeout <= 3600:  # NaN too
        raise ConfigError("[limits] keep_alive_timeout must be 1 to 3600 seconds")
    if options.stream_buffer_bytes < 4096:
        raise ConfigError("[limits] stream_buffer_bytes must be at least 4096")
    if not options.url_lifetime_per_file_ms >= 0:  # NaN too
        raise ConfigError("[limits] url_lifetime_per_file_ms must be 0 or more")
    if not 60 <= options.url_lifetime_max <= LONGEST_SIGNABLE:
        raise ConfigError(f"[limits] url_lifetime_max must be 60 to {LONGEST_SIGNABLE} seconds (7 days)")
    if not 0 <= options.scan_plan_budget <= 600:  # NaN too
        raise ConfigError("[limits] scan_plan_budget must be 0 to 600 seconds")
    if not options.async_query_budget >= 0:  # NaN too
        raise ConfigError("[limits] async_query_budget must be 0 seconds or more")
    if options.streams_per_token < 0 or options.streams_per_process < 0:
        raise ConfigError("[limits] streams_per_token and streams_per_process must be 0 (off) or more")
    return options


def _console_options(console: dict[str, Any], defaults: ServiceOptions) -> dict[str, Any]:
    try:
        idle = float(console.get("session_idle_minutes", defaults.console_idle_minutes))
        hours = float(console.get("activity_retention_hours", defaults.activity_retention_hours))
        events = int(console.get("activity_max_events", defaults.activity_max_events))
    except ValueError as error:
        raise ConfigError(f"invalid [console] setting: {error}") from error
    if not idle > 0:  # NaN too
        raise ConfigError("[console] session_idle_minutes must be above 0")
    if not hours >= 0 or events < 0:
        raise ConfigError("[console] activity_retention_hours and activity_max_events cannot be negative")
    return {
        "console_idle_minutes": idle,
        "activity_retention_hours": hours,
        "activity_max_events": events,
    }


def _cache_options(cache: dict[str, Any], defaults: ServiceOptions) -> dict[str, Any]:
    try:
        files = int(cache.get("snapshot_files", defaults.snapshot_cache_files))
        seconds = float(cache.get("files_check_seconds", defaults.files_check_seconds))
        refresh = float(cache.get("refresh_seconds", defaults.refresh_seconds))
        warm = parse_bool(cache.get("warm_on_start", defaults.warm_on_start))
        window = float(cache.get("warm_window_hours", defaults.warm_window_hours))
    except ValueError as error:
        raise ConfigError(f"invalid [cache] setting: {error}") from error
    if files < 0 or not seconds >= 0 or not refresh >= 0 or not window >= 0:  # `not >=`: NaN too
        raise ConfigError(
            "[cache] snapshot_files, files_check_seconds, refresh_seconds and warm_window_hours "
            "cannot be negative"
        )
    return {
        "snapshot_cache_files": files,
        "files_check_seconds": seconds,
        "refresh_seconds": refresh,
        "warm_on_start": warm,
        "warm_window_hours": window,
    }
