"""Named Iceberg catalogs from the configuration, loaded lazily with pyiceberg: `CatalogRegistry`.

    [catalogs.testice]                       # WAREHOUSE "testice" in a table spec
    type = "rest"
    uri = "https://aistor:9000/_iceberg"
    "rest.sigv4-enabled" = "true"
    "rest.signing-name" = "s3tables"
    "rest.signing-region" = "local"
    "client.access-key-id" = "${AISTOR_ACCESS_KEY}"   # from the environment
    "client.secret-access-key" = "${AISTOR_SECRET_KEY}"
    "s3.endpoint" = "https://aistor:9000"
    "s3.path-style-access" = "true"
    "sharing.warehouses" = "*"               # ours: serve any warehouse name through this catalog
    "sharing.warehouse-template" = "{}"      # ours: how the name is passed ("s3://{}/" for SeaweedFS)
    "sharing.s3-public-endpoint" = "…"       # ours: the object store address recipients reach

Every key other than `sharing.*` goes to pyiceberg's `load_catalog` as is, so
catalog types and options are pyiceberg's. A catalog that serves many
warehouses (AIStor, where the warehouse is a request parameter) is loaded once
per warehouse with `warehouse` set to the name in the spec.

Each block is checked when the configuration is read (`settings.catalog_settings`).
`CatalogRegistry.verify` then checks, without connecting, what can only be checked
on the running machine: that `${VAR}`s are set and that a SQL catalog's driver is
installed. Every failure is one `CatalogError` line naming the catalog and the key
or module, never a value.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from pyarrow.fs import AwsStandardS3RetryStrategy

from share_store.errors import AdminError, CatalogError, NotFound, ShareStoreError
from share_store.outages import outages_unavailable
from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.table_sources.installed import check_installed
from share_store.table_sources.settings import OWN_PREFIX, catalog_kind, catalog_settings
from share_store.table_sources.vended import VendedS3Storage, vended_credentials, vended_storage

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


#: Words in a key whose value is kept out of messages (a failed load's reason may quote values).
SECRET_WORDS = ("secret", "password", "token", "credential", "key", "session", "sas", "connection")
URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def _reason(error: BaseException, props: Mapping[str, str]) -> str:
    """Why a catalog did not load, in one line: the error's type and first line, credentials hidden."""
    if isinstance(error, ImportError) and error.name:
        return f"the module '{error.name}' is not installed"
    lines = str(error).strip().splitlines()
    text = URL_USERINFO.sub(r"\1…@", lines[0] if lines else "")
    for key, value in props.items():
        if len(value) >= 4 and any(word in key.lower() for word in SECRET_WORDS):
            text = text.replace(value, "…")
    text = text if len(text) <= 300 else text[:300] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class QuickS3Retries(AwsStandardS3RetryStrategy):
    """pyarrow's standard retries, two attempts instead of three (pyiceberg instantiates it by name)."""

    def __init__(self) -> None:
        super().__init__(max_attempts=2)


#: Defaults (settings given win) for the catalog's own reads of table metadata.
#: Left alone, pyarrow's S3 client makes three attempts of 3 s each on a store
#: that does not answer, and pyiceberg's REST client retries SigV4 requests 10
#: times without any timeout, when a recipient should get a 503 within seconds.
FAIL_FAST = {
    "s3.retry-strategy-impl": f"{__name__}.QuickS3Retries",
    "rest.sigv4.max-retries": "1",
}
BOUNDED_REST_CATALOG = "share_store.table_sources.rest_session.BoundedRestCatalog"


def fail_fast(props: dict[str, str]) -> dict[str, str]:
    """Catalog properties with `FAIL_FAST` defaults, and REST catalogs loaded with request timeouts."""
    result = FAIL_FAST | props
    kind = result.get("type") or ("rest" if result.get("uri", "").startswith(("http://", "https://")) else "")
    if kind.lower() == "rest" and "py-catalog-impl" not in result:
        # pyiceberg refuses `type` next to `py-catalog-impl`; the class is a RestCatalog.
        result.pop("type", None)
        result["py-catalog-impl"] = BOUNDED_REST_CATALOG
    return result


def expand_environment(
    value: str, env: Mapping[str, str] | None = None, where: str = "catalog setting"
) -> str:
    """`value` with each `${VAR}` replaced; CatalogError, saying `where`, for one that is not set."""
    variables: Mapping[str, str] = os.environ if env is None else env

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise CatalogError(f"{where}: refers to ${{{name}}}, which is not set")
        return variables[name]

    return ENV_REFERENCE.sub(replace, value)


def same_endpoint(a: str | None, b: str | None) -> bool:
    """Whether two endpoint URLs name the same store (scheme, host and port; case and slashes aside)."""
    if not a or not b:
        return False
    return a.rstrip("/").lower() == b.rstrip("/").lower()


#: The backends pyiceberg lacks: our own read-only catalogs, by `sharing.backend`.
OWN_BACKENDS = {
    "hadoop": ("share_store.table_sources.hadoop", "HadoopCatalog"),
    "s3tables": ("share_store.table_sources.s3tables", "S3TablesCatalog"),
}


def own_backend(backend: str, name: str, props: dict[str, Any]) -> Any:
    """One of our own read-only catalogs (`hadoop`, `s3tables`), made like pyiceberg's."""
    module, class_name = OWN_BACKENDS[backend]
    return getattr(importlib.import_module(module), class_name)(name, **props)


class OwnCatalogs(Protocol):
    """The server's own warehouses (`share_store.catalog.table_source.OwnWarehouses`)."""

    def serves(self, warehouse: str) -> bool: ...

    def names(self) -> list[str]: ...

    def tables(self, warehouse: str) -> Any: ...


class CatalogRegistry:
    """The configured catalogs, each loaded once (per warehouse), and the storage of their files.

    `storage_endpoints` are `[storage]`'s endpoint and public endpoint: a catalog
    whose `s3.endpoint` is that same store signs its files for the same public
    address, as Delta tables' files are, unless it names its own.
    """

    def __init__(
        self,
        configs: dict[str, dict[str, Any]],
        url_lifetime: int = 3600,
        storage_endpoints: tuple[str | None, str | None] = (None, None),
    ) -> None:
        # As written or as the configuration already converted them (`read_catalogs`): converting
        # takes a converted block back unchanged, so the grammar is applied once either way.
        self.configs = {name: catalog_settings(name, props) for name, props in configs.items()}
        self.url_lifetime = url_lifetime
        self.storage_endpoints = storage_endpoints
        self._catalogs: dict[str, Any] = {}
        self._storages: dict[str, ObjectStorage | None] = {}
        self._lock = threading.Lock()
        #: The server's own warehouses (AIStor Tables), named before any configured catalog.
        self.own: OwnCatalogs | None = None
        #: Why each catalog last failed to load, and when (epoch seconds), for the console's health page.
        self.last_errors: dict[str, tuple[float, str]] = {}

    def _own_serves(self, warehouse: str) -> bool:
        return self.own is not None and self.own.serves(warehouse)

    def names(self) -> list[str]:
        """Every warehouse a table can name: the server's own, then the configured catalogs."""
        own = self.own.names() if self.own is not None else []
        return own + sorted(name for name in self.configs if name not in own)

    def _config_for(self, warehouse: str) -> tuple[str, dict[str, str]]:
        if warehouse in self.configs:
            return warehouse, self.configs[warehouse]
        for name, props in self.configs.items():
            served = props.get("sharing.warehouses", "")
            if served == "*" or warehouse in [w.strip() for w in served.split(",")]:
                # AIStor takes the bare name; other REST catalogs (SeaweedFS's) want `s3://name/`.
                template = props.get("sharing.warehouse-template", "{}")
                return name, props | {"warehouse": template.replace("{}", warehouse)}
        raise NotFound(f"no Iceberg catalog is configured for warehouse '{warehouse}'")

    def check_warehouse(self, warehouse: str) -> None:
        """AdminError unless the server's own warehouse or a configured catalog serves `warehouse`."""
        if self._own_serves(warehouse):
            return
        try:
            self._config_for(warehouse)
        except NotFound as error:
            configured = ", ".join(sorted(self.configs)) or "none"
            raise AdminError(f"{error.message} (configured catalogs: {configured})") from None

    def properties(self, warehouse: str) -> dict[str, str]:
        name, props = self._config_for(warehouse)
        return {
            key: expand_environment(value, where=f"[catalogs.{name}] {key}")
            for key, value in props.items()
            if not key.startswith(OWN_PREFIX)
        }

    def verify(self) -> None:
        """What start-up checks of every catalog, connecting to none: its `${VAR}`s are set, and what
        it needs is installed (`check_installed`). CatalogError names the catalog and the key."""
        for name in self.configs:
            check_installed(name, self.properties(name))

    def catalog(self, warehouse: str) -> Any:
        if self._own_serves(warehouse):
            assert self.own is not None
            return self.own.tables(warehouse)
        with self._lock:
            if warehouse in self._catalogs:
                return self._catalogs[warehouse]
        from pyiceberg.catalog import load_catalog

        name, raw = self._config_for(warehouse)
        props: dict[str, Any] = self.properties(warehouse)
        own = {key: expand_environment(value, where=f"[catalogs.{name}] {key}")
               for key, value in raw.items() if key.startswith(OWN_PREFIX)}  # fmt: skip
        if own.get("sharing.auth"):
            props["auth"] = json.loads(own["sharing.auth"])  # pyiceberg takes it as a table
        # pyiceberg would report a missing SQL driver as SQLAlchemy itself missing.
        check_installed(name, props)
        # A failed load is not cached: the next request tries again.
        try:
            with outages_unavailable(f"the Iceberg catalog for warehouse '{warehouse}'"):
                backend = own.get("sharing.backend")
                if backend:
                    catalog = own_backend(backend, name, {**props, **own})
                else:
                    catalog = load_catalog(name, **fail_fast(props))
        except ShareStoreError as error:
            self._failed(name, error.message)
            raise
        except Exception as error:
            reason = _reason(error, props)
            failure = CatalogError(f"the Iceberg catalog '{name}' cannot load: {reason}")
            self._failed(name, failure.message)
            raise failure from error
        with self._lock:
            self._catalogs[warehouse] = catalog
            self.last_errors.pop(name, None)
        return catalog

    def health(self) -> list[dict[str, Any]]:
        """Each configured catalog: its backend, whether it is loaded, and why it last failed to load
        (until it loads again). Nothing is connected to."""
        with self._lock:
            loaded = set(self._catalogs)
            errors = dict(self.last_errors)
        entries = []
        for name, props in sorted(self.configs.items()):
            failed = errors.get(name)
            entries.append(
                {
                    "name": name,
                    "backend": props.get("sharing.backend") or catalog_kind(props) or "rest",
                    "loaded": name in loaded or any(w in loaded for w in self._served_by(name)),
                    "lastError": failed[1] if failed else None,
                    "lastErrorAt": failed[0] if failed else None,
                }
            )
        return entries

    def _served_by(self, name: str) -> list[str]:
        """The warehouses loaded through catalog `name` under other names (`sharing.warehouses`)."""
        return [w for w in self._catalogs if w not in self.configs and self._owner(w) == name]

    def _owner(self, warehouse: str) -> str | None:
        try:
            return self._config_for(warehouse)[0]
        except NotFound:
            return None

    def _failed(self, name: str, message: str) -> None:
        """Remember why the catalog last failed to load (messages never hold a setting's value)."""
        with self._lock:
            self.last_errors[name] = (time.time(), message)

    def storage(self, warehouse: str) -> ObjectStorage | None:
        """An S3 store signed with the catalog's own credentials, when it names them.

        A Glue or S3 Tables catalog without keys reads with the AWS provider chain; its
        files are signed with the chain too unless they are in `[storage]`'s store.
        """
        if self._own_serves(warehouse):
            return None  # the server's own warehouses are buckets of its own storage
        with self._lock:
            if warehouse in self._storages:
                return self._storages[warehouse]
        props = self.properties(warehouse)
        own = self._config_for(warehouse)[1]
        access_key = props.get("s3.access-key-id") or props.get("client.access-key-id")
        on_aws_chain = not access_key and self._on_aws_chain(props, own)
        storage = None
        if access_key or on_aws_chain:
            storage = S3Storage(
                S3Settings(
                    endpoint=props.get("s3.endpoint"),
                    public_endpoint=self._public_endpoint(props.get("s3.endpoint"), own),
                    region=props.get("s3.region")
                    or props.get("client.region")
                    or props.get("glue.region")
                    or "us-east-1",
                    access_key=access_key,
                    secret_key=props.get("s3.secret-access-key") or props.get("client.secret-access-key"),
                    session_token=props.get("s3.session-token") or None,
                    path_style=props.get("s3.force-virtual-addressing", "false").lower() != "true",
                ),
                self.url_lifetime,
            )
        with self._lock:
            self._storages[warehouse] = storage
        return storage

    def _on_aws_chain(self, props: Mapping[str, str], own: Mapping[str, str]) -> bool:
        """Whether a catalog without keys reads its files with the AWS provider chain, elsewhere than
        `[storage]`'s store (whose keys then sign, as they always did)."""
        aws = catalog_kind(props) == "glue" or own.get("sharing.backend") == "s3tables"
        return aws and not same_endpoint(props.get("s3.endpoint"), self.storage_endpoints[0])

    def vended_storage(
        self, warehouse: str, table_properties: Mapping[str, str], current: VendedS3Storage | None = None
    ) -> VendedS3Storage | None:
        """The store signed with the keys the catalog vended with a table, if it did (see `vended.py`).

        `current` is kept while the table comes with the same keys.
        """
        if self._own_serves(warehouse):
            return None
        props = self.properties(warehouse)
        credentials = vended_credentials(table_properties, props)
        if credentials is None:
            return None
        if current is not None and current.credentials == credentials:
            return current
        public = self._public_endpoint(credentials.endpoint, self._config_for(warehouse)[1])
        region = props.get("s3.region") or props.get("client.region") or "us-east-1"
        return vended_storage(credentials, public, region, self.url_lifetime)

    def _public_endpoint(self, endpoint: str | None, own: dict[str, str]) -> str | None:
        """What recipients reach: the catalog's own setting, else `[storage]`'s for the same store."""
        if own.get("sharing.s3-public-endpoint"):
            return own["sharing.s3-public-endpoint"]
        storage_endpoint, storage_public = self.storage_endpoints
        if storage_public and same_endpoint(endpoint, storage_endpoint):
            return storage_public
        return endpoint
