"""The configuration file's sections: which keys each holds, and each value read and checked.

`SHARING_<SECTION>_<KEY>` variables take precedence over the file's values; an
unknown key or a bad value is a `ConfigError` naming it, at load time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from share_store.catalog.idempotency import MAX_LIFETIME
from share_store.catalog.maintenance.configuration import Limits
from share_store.catalog.maintenance.schedule import Background
from share_store.errors import AdminError, CatalogError
from share_store.lifetimes import MAX_TOKEN_LIFETIME, parse_duration
from share_store.signing.delegation import ACCESS_MODES
from share_store.storage.sts_vending import VendingSettings
from share_store.table_sources.settings import catalog_settings
from share_store.tables.options import DeleteOptions
from sharing_server.http.errors import ConfigError

ENV_PREFIX = "SHARING_"
BOOL_TRUE = {"1", "true", "yes", "on"}


ICEBERG_KINDS: dict[str, type] = {
    "cache_bucket": str,
    "cache_prefix": str,
    "inline_dv_bytes": int,
    "deletes_in_parquet": str,
    "equality_delete_budget_seconds": float,
    "delta_snapshots": int,
}


def delete_options(values: dict[str, Any]) -> DeleteOptions:
    """The `[iceberg]` section, each value checked and a bad one named."""
    parsed: dict[str, Any] = {}
    for key, kind in ICEBERG_KINDS.items():
        if values.get(key) not in (None, ""):
            try:
                parsed[key] = kind(values[key])
            except ValueError as error:
                raise ConfigError(f"invalid [iceberg] {key}: {error}") from error
    try:
        return DeleteOptions(**parsed)
    except ValueError as error:
        raise ConfigError(f"invalid [iceberg] setting: {error}") from error


#: `[iceberg]`'s credential vending keys (`share_store/storage/sts_vending.py`), by `VendingSettings` field.
VENDING_KEYS = {
    "credential_vending": ("mode", str),
    "credential_role_arn": ("role_arn", str),
    "credential_sts_endpoint": ("sts_endpoint", str),
    "credential_duration": ("duration", int),
}


def vending_settings(values: dict[str, Any]) -> VendingSettings:
    """`[iceberg] credential_*`, each value checked and a bad one named."""
    parsed: dict[str, Any] = {}
    for key, (name, kind) in VENDING_KEYS.items():
        if values.get(key) not in (None, ""):
            try:
                parsed[name] = kind(values[key])
            except ValueError as error:
                raise ConfigError(f"invalid [iceberg] {key}: {error}") from error
    try:
        return VendingSettings(**parsed)
    except ValueError as error:
        raise ConfigError(f"invalid [iceberg] setting: {error}") from error


def max_token_lifetime(value: Any) -> timedelta | None:
    """`[admin] max_token_lifetime`: a duration (`365d`), or "never" for no bound."""
    if value in (None, ""):
        return MAX_TOKEN_LIFETIME
    try:
        return parse_duration(str(value))
    except AdminError as error:
        raise ConfigError(f"invalid [admin] max_token_lifetime: {error.message}") from None


def token_hash(value: Any) -> str | None:
    if value in (None, ""):
        return None
    text = str(value).strip().lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ConfigError("[admin] token_hash must be the SHA-256 hex digest of the admin token")
    return text


def parse_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in BOOL_TRUE


SERVER_KEYS: dict[str, Callable[[Any], Any]] = {
    "host": str,
    "port": int,
    "prefix": str,
    "public_url": str,
    "data_dir": Path,
    "url_lifetime": int,
    "secret_key": str,
    "certfile": str,
    "keyfile": str,
    "workers": int,
    "audit_log": str,
    "proxy_hops": int,
    "prefer_delta_format": parse_bool,
}
#: `[maintenance]`'s limits (`share_store.catalog.maintenance.configuration.Limits`), each a field of it.
MAINTENANCE_LIMITS = (
    "row_group_decoded_mb",
    "file_decoded_mb",
    "run_cpu_seconds",
    "run_seconds",
    "runs_at_once",
    "runs_per_caller",
    "runs_waiting",
    "wait_seconds",
)
SECTION_KEYS = {
    "admin": ("token_hash", "max_token_lifetime"),
    "limits": (
        "per_token_rps",
        "admin_rps",
        "global_rps",
        "max_body_bytes",
        "max_hint_nodes",
        "hint_budget_ms",
        "body_timeout",
        "stream_send_timeout",
        "keep_alive_timeout",
        "stream_buffer_bytes",
        "streams_per_token",
        "streams_per_process",
        "async_query_budget",
        "scan_plan_budget",
        "url_lifetime_per_file_ms",
        "url_lifetime_max",
    ),
    "oauth": ("access_token_lifetime",),
    "iceberg": (*ICEBERG_KINDS, *VENDING_KEYS),
    "cache": (
        "snapshot_files",
        "files_check_seconds",
        "warm_on_start",
        "refresh_seconds",
        "warm_window_hours",
    ),
    "console": ("session_idle_minutes", "activity_retention_hours", "activity_max_events"),
    "warehouses": ("access_delegation", "idempotency_key_minutes"),
    "maintenance": (
        "background",
        "interval_seconds",
        "cpu_share",
        "period_hours",
        *MAINTENANCE_LIMITS,
    ),
}
STORAGE_KEYS = (
    "type",
    "root",
    "endpoint",
    "public_endpoint",
    "region",
    "access_key",
    "secret_key",
    "session_token",
    "path_style",
    "connect_timeout",
    "read_timeout",
    "max_attempts",
)


def read_section(
    raw: dict[str, Any], env: dict[str, str], name: str, keys: Iterable[str], strict: bool = True
) -> dict[str, Any]:
    """One `[name]` table of the file, `SHARING_<NAME>_<KEY>` variables taking precedence."""
    values = dict(raw.get(name, {}))
    for key in keys:
        variable = f"{ENV_PREFIX}{name.upper()}_{key.upper()}"
        if variable in env:
            values[key] = env[variable]
    unknown = set(values) - set(keys)
    if strict and unknown:
        raise ConfigError(f"unknown [{name}] settings: {', '.join(sorted(unknown))}")
    return values


def idempotency_key_minutes(values: dict[str, Any]) -> int:
    """`[warehouses] idempotency_key_minutes`: 0 (keys off) to a week; 30 by default."""
    raw = values.get("idempotency_key_minutes", 30)
    limit = int(MAX_LIFETIME.total_seconds() // 60)
    try:
        minutes = int(str(raw))
    except ValueError:
        minutes = -1
    if isinstance(raw, bool) or not 0 <= minutes <= limit:
        raise ConfigError(f"[warehouses] idempotency_key_minutes: a whole number from 0 (off) to {limit}")
    return minutes


def access_delegation(values: dict[str, Any]) -> tuple[str, ...]:
    """`[warehouses] access_delegation`: a list (or a comma-separated string, as an environment
    variable gives it) of "vended-credentials" and "remote-signing"; none by default."""
    raw = values.get("access_delegation", [])
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ConfigError(
            '[warehouses] access_delegation: a list such as ["vended-credentials", "remote-signing"]'
        )
    modes = tuple(dict.fromkeys(item.strip().lower() for item in items if item.strip()))
    unknown = [mode for mode in modes if mode not in ACCESS_MODES]
    if unknown:
        raise ConfigError(
            f"[warehouses] access_delegation: {', '.join(unknown)} is no mode; "
            f"use {' and/or '.join(ACCESS_MODES)}"
        )
    return modes


def background_maintenance(values: dict[str, Any]) -> Background:
    """`[maintenance]`: the server's own maintenance of its warehouses' tables; on by default."""
    defaults = Background()
    try:
        return Background(
            enabled=parse_bool(values.get("background", defaults.enabled)),
            interval_seconds=float(values.get("interval_seconds", defaults.interval_seconds)),
            cpu_share=float(values.get("cpu_share", defaults.cpu_share)),
            period_hours=float(values.get("period_hours", defaults.period_hours)),
        )
    except ValueError as error:
        message = str(error)
        raise ConfigError(
            message if message.startswith("[") else f"invalid [maintenance] setting: {message}"
        ) from None


def maintenance_limits(values: dict[str, Any]) -> Limits:
    """`[maintenance]`'s limits on every run, asked for or background: what a run may cost
    (files' decoded sizes, CPU and wall-clock seconds) and how many run at once (`Limits`)."""
    defaults = Limits()
    try:
        given: dict[str, Any] = {}
        for key in MAINTENANCE_LIMITS:
            kind = type(getattr(defaults, key))
            value = values.get(key, getattr(defaults, key))
            given[key] = int(str(value).strip()) if kind is int else float(value)
        return Limits(**given)
    except ValueError as error:
        message = str(error)
        raise ConfigError(
            message if message.startswith("[") else f"invalid [maintenance] setting: {message}"
        ) from None


def read_catalogs(raw: Any) -> dict[str, dict[str, str]]:
    """The `[catalogs.NAME]` blocks, each checked (`catalog_settings`): a bad one is named with its key."""
    if not isinstance(raw, dict):
        raise ConfigError("catalogs: catalogs are [catalogs.NAME] blocks of settings")
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise ConfigError(f"[catalogs] {key}: a catalog's settings go in its own block, [catalogs.NAME]")
    try:
        return {name: catalog_settings(name, block) for name, block in raw.items()}
    except CatalogError as error:
        raise ConfigError(error.message) from None


def read_legacy_catalog(raw: Any) -> None:
    """The legacy single-catalog `[catalog]` block: none here, where every catalog is named
    (`[catalogs.NAME]`, NAME being the WAREHOUSE a table spec names). The documentation's
    multi-catalog example keeps one holding only `catalog_url = ""`; a block whose values are all
    empty is that, and ignored. Anything else in it would be silently lost, so it is refused."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ConfigError("catalog: the legacy [catalog] block is a table; name catalogs as [catalogs.NAME]")
    for key, value in raw.items():
        if value != "":
            raise ConfigError(
                f"[catalog] {key}: a single unnamed catalog is not read here; write it as [catalogs.NAME], "
                "NAME being the WAREHOUSE of a table spec (an empty [catalog] is ignored)"
            )


def read_query(raw: Any) -> None:
    """`[query]`: `default_catalog`, the engine's default for unqualified table names, is taken and
    ignored, since every table spec here names its WAREHOUSE (`NAME:uniform:WAREHOUSE:NAMESPACE:TABLE`)."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ConfigError("query: [query] is a table")
    default = raw.get("default_catalog")
    if default is not None and not isinstance(default, str):
        raise ConfigError("[query] default_catalog: must be a string, a catalog's name")
