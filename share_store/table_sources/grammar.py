"""The documented catalog grammar: a backend, its auth and its storage, mapped to pyiceberg's keys.

```toml
[catalogs.partner]
catalog_url = "https://partner.example.com/iceberg"
warehouse = "shared"
[catalogs.partner.backend]
type = "rest"            # rest (default) | hms | glue | s3tables | jdbc | hadoop
[catalogs.partner.auth]
type = "client_credentials"   # client_credentials | static | anonymous | aws
token_endpoint = "https://partner.example.com/oauth/tokens"
client_id = "sharing"
client_secret = "${PARTNER_SECRET}"
[catalogs.partner.storage]
s3_endpoint = "https://partner-s3.example.com"
s3_region = "us-east-1"
s3_access_key = "..."
s3_secret_key = "..."
s3_path_style = true
```

A backend's keys may sit in the block itself or in its `[backend]` table. A
non-REST block may carry an empty `catalog_url`, as the documentation's
multi-catalog example writes it: it is ignored (a non-empty one is refused). The
result is the pyiceberg-key form the registry loads (`type`, `uri`, `s3.*`, ...)
plus our own `sharing.*` keys: `sharing.backend` for the two backends pyiceberg
lacks (`hadoop`, `s3tables`: our read-only catalogs) and `sharing.auth`, the
`auth` table pyiceberg takes (JSON, decoded when the catalog loads). Pure
functions: every mistake is one `CatalogError` line naming the catalog and the
key, never a value. The result is itself a valid block in pyiceberg's key form
(`settings.catalog_settings` takes it back unchanged), so a block is converted
once, when the configuration is read, however often it is checked after.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from share_store.errors import CatalogError

BACKENDS = ("rest", "hms", "glue", "s3tables", "jdbc", "hadoop")
AUTH_TYPES = ("client_credentials", "static", "anonymous", "aws")
#: Each backend's keys: required, then optional.
BACKEND_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rest": (("catalog_url", "warehouse"), ()),
    "hms": (("uri", "warehouse"), ()),
    "glue": (("region", "warehouse"), ("endpoint",)),
    "s3tables": (("table_bucket_arn",), ("endpoint_url", "warehouse")),
    "jdbc": (("url", "warehouse"), ()),
    "hadoop": (("warehouse",), ()),
}
AUTH_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "client_credentials": (("token_endpoint", "client_id", "client_secret"), ("scope",)),
    "static": (("token",), ()),
    "anonymous": ((), ()),
    "aws": ((), ("signing_name", "signing_region")),
}
#: `[storage]` keys, as pyiceberg's FileIO (and the registry's storage for signing) take them.
STORAGE_KEYS = {
    "s3_endpoint": "s3.endpoint",
    "s3_region": "s3.region",
    "s3_access_key": "s3.access-key-id",
    "s3_secret_key": "s3.secret-access-key",
    "s3_session_token": "s3.session-token",
}
STORAGE_FLAGS = ("s3_path_style", "s3_allow_http")
TABLES = ("backend", "auth", "storage")
#: Keys only the documented grammar has: one of them (or a table above) marks a block as written in it.
GRAMMAR_MARKS = frozenset({"catalog_url", "url", "region", "endpoint", "endpoint_url", "table_bucket_arn"})
BLOCK_KEYS = GRAMMAR_MARKS | {"warehouse", "uri", *TABLES}


def uses_grammar(block: Mapping[str, Any]) -> bool:
    return any(
        key in GRAMMAR_MARKS or (key in TABLES and isinstance(value, dict)) for key, value in block.items()
    )


def _text(name: str, where: str, key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise CatalogError(f"[catalogs.{name}{where}] {key}: must be a string")


def _table(name: str, block: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = block.get(key, {})
    if not isinstance(value, dict):
        raise CatalogError(f"[catalogs.{name}] {key}: must be a table, [catalogs.{name}.{key}]")
    return value


def _known(name: str, where: str, given: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> None:
    for key in given:
        if key not in allowed:
            listed = ", ".join(allowed) or "none"
            raise CatalogError(f"[catalogs.{name}{where}] {key}: not a key of {what} (its keys: {listed})")


def _required(name: str, where: str, given: Mapping[str, str], keys: tuple[str, ...], what: str) -> None:
    for key in keys:
        if not given.get(key):
            raise CatalogError(f"[catalogs.{name}{where}] {key}: missing, and {what} needs it")


def documented_settings(name: str, block: Mapping[str, Any]) -> dict[str, str]:
    """One block written in the documented grammar, as pyiceberg's keys and ours."""
    mixed = sorted(key for key in block if key not in BLOCK_KEYS)
    if mixed:
        hint = f" (the backend's type goes in [catalogs.{name}.backend])" if "type" in mixed else ""
        raise CatalogError(
            f"[catalogs.{name}] {', '.join(mixed)}: a block written in the documented grammar "
            f"(backend, auth, storage) may not mix in pyiceberg's keys{hint}"
        )
    backend_table = _table(name, block, "backend")
    backend = _text(name, ".backend", "type", backend_table.get("type", "rest")).lower()
    if backend not in BACKENDS:
        raise CatalogError(
            f"[catalogs.{name}.backend] type: '{backend}' is not a backend; use one of {', '.join(BACKENDS)}"
        )
    keys: dict[str, str] = {}
    for source, where in ((block, ""), (backend_table, ".backend")):
        for key, value in source.items():
            if key in TABLES or (where and key == "type"):
                continue
            text = _text(name, where, key, value)
            if key in keys and keys[key] != text:
                raise CatalogError(f"[catalogs.{name}] {key}: given twice, in the block and in its backend")
            keys[key] = text
    if backend != "rest" and "catalog_url" in keys:
        _no_catalog_url(name, backend, keys.pop("catalog_url"))
    required, optional = BACKEND_KEYS[backend]
    _known(name, "", keys, required + optional, f"a {backend} backend")
    _required(name, "", keys, required, f"a {backend} backend")
    props = _backend(name, backend, keys)
    props.update(_auth(name, backend, _table(name, block, "auth")))
    props.update(_storage(name, _table(name, block, "storage")))
    return props


def _no_catalog_url(name: str, backend: str, value: str) -> None:
    """A non-REST backend has no catalog URL: an empty `catalog_url` (the documentation's example
    writes one on its glue, s3tables and hms blocks) is ignored, any other refused."""
    if value:
        raise CatalogError(
            f"[catalogs.{name}] catalog_url: a {backend} backend has no catalog URL; leave the key out "
            "(an empty one, as the documentation writes it, is ignored)"
        )


def table_bucket_region(name: str, key: str, arn: str) -> str:
    """The region of an S3 Tables bucket's ARN (`arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME`)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[:3] != ["arn", "aws", "s3tables"] or not parts[5].startswith("bucket/"):
        raise CatalogError(
            f"[catalogs.{name}] {key}: not a table bucket ARN (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)"
        )
    return parts[3]


def _backend(name: str, backend: str, keys: dict[str, str]) -> dict[str, str]:
    warehouse = {"warehouse": keys["warehouse"]} if keys.get("warehouse") else {}
    if backend == "rest":
        return {"type": "rest", "uri": keys["catalog_url"], **warehouse}
    if backend == "hms":
        uri = keys["uri"] if "://" in keys["uri"] else f"thrift://{keys['uri']}"
        return {"type": "hive", "uri": uri, **warehouse}
    if backend == "glue":
        endpoint = {"glue.endpoint": keys["endpoint"]} if keys.get("endpoint") else {}
        return {"type": "glue", "glue.region": keys["region"], **endpoint, **warehouse}
    if backend == "jdbc":
        return {"type": "sql", "uri": jdbc_uri(name, keys["url"]), **warehouse}
    if backend == "s3tables":
        arn = keys["table_bucket_arn"]
        region = table_bucket_region(name, "table_bucket_arn", arn)
        props = {"sharing.backend": "s3tables", "sharing.table-bucket-arn": arn, **warehouse}
        if region:
            props["client.region"] = region
        if keys.get("endpoint_url"):
            props["sharing.endpoint-url"] = keys["endpoint_url"]
        return props
    return {"sharing.backend": "hadoop", **warehouse}


def jdbc_uri(name: str, url: str) -> str:
    """A JDBC backend's `url` as SQLAlchemy takes it; the prefix picks the driver."""
    url = url.removeprefix("jdbc:")
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:")
        if path.startswith("//"):
            return url  # already SQLAlchemy's form
        return f"sqlite:///{path}"
    for prefix, scheme in (("postgresql://", "postgresql+psycopg"), ("postgres://", "postgresql+psycopg"),
                           ("mysql://", "mysql+pymysql"), ("mariadb://", "mysql+pymysql")):  # fmt: skip
        if url.startswith(prefix):
            return f"{scheme}://{url.removeprefix(prefix)}"
    if url.startswith(("postgresql+", "mysql+")):
        return url
    raise CatalogError(
        f"[catalogs.{name}] url: a jdbc url starts with sqlite:, postgresql:// (or postgres://) or mysql://"
    )


def _auth(name: str, backend: str, table: Mapping[str, Any]) -> dict[str, str]:
    if not table:
        return {"sharing.auth": json.dumps({"type": "noop"})} if backend == "rest" else {}
    kind = _text(name, ".auth", "type", table.get("type", "")).lower()
    if kind == "session_bearer":
        raise CatalogError(
            f"[catalogs.{name}.auth] type: session_bearer passes an end user's session token on, and this "
            "server has no end-user session; use client_credentials, static, anonymous or aws"
        )
    if kind not in AUTH_TYPES:
        raise CatalogError(
            f"[catalogs.{name}.auth] type: '{kind}' is not an auth type; use one of {', '.join(AUTH_TYPES)}"
        )
    keys = {key: _text(name, ".auth", key, value) for key, value in table.items() if key != "type"}
    required, optional = AUTH_KEYS[kind]
    _known(name, ".auth", keys, required + optional, f"{kind} auth")
    _required(name, ".auth", keys, required, f"{kind} auth")
    if kind == "aws":
        if backend != "rest":
            return {}  # Glue and S3 Tables take the AWS provider chain when no keys are given
        props = {"rest.sigv4-enabled": "true"}
        if keys.get("signing_name"):
            props["rest.signing-name"] = keys["signing_name"]
        if keys.get("signing_region"):
            props["rest.signing-region"] = keys["signing_region"]
        return props
    if backend != "rest":
        raise CatalogError(f"[catalogs.{name}.auth] type: {kind} auth is for REST catalogs, not {backend}")
    if kind == "anonymous":
        return {"sharing.auth": json.dumps({"type": "noop"})}
    if kind == "static":
        return {"token": keys["token"]}
    oauth2 = {"client_id": keys["client_id"], "client_secret": keys["client_secret"],
              "token_url": keys["token_endpoint"]}  # fmt: skip
    if keys.get("scope"):
        oauth2["scope"] = keys["scope"]
    return {"sharing.auth": json.dumps({"type": "oauth2", "oauth2": oauth2})}


def _storage(name: str, table: Mapping[str, Any]) -> dict[str, str]:
    _known(name, ".storage", table, (*STORAGE_KEYS, *STORAGE_FLAGS), "storage")
    props = {STORAGE_KEYS[key]: _text(name, ".storage", key, value) for key, value in table.items()
             if key in STORAGE_KEYS}  # fmt: skip
    if "s3_path_style" in table:
        path_style = _text(name, ".storage", "s3_path_style", table["s3_path_style"]).lower() == "true"
        props["s3.force-virtual-addressing"] = "false" if path_style else "true"
    allow_http = _text(name, ".storage", "s3_allow_http", table.get("s3_allow_http", True)).lower()
    if allow_http == "false" and props.get("s3.endpoint", "").startswith("http://"):
        raise CatalogError(
            f"[catalogs.{name}.storage] s3_endpoint: plain http, and s3_allow_http = false; use https"
        )
    return props
