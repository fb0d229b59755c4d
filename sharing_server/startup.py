"""Start-up: the one place where the configuration meets the disk, and the app is assembled.

`sharing_server.config` only reads and checks settings. Here, once per
process, the data directory, the local buckets' root and the embedded Iceberg
warehouse are made, the server key is created on first start, and the store,
storage and catalogs are opened for `create_app`. The CLI, the ASGI entry
point and the tests all start the server through `open_services` and
`build_app`, so they cannot drift apart.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from starlette.applications import Starlette

from share_store.persistence import ShareStore
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server.app import create_app
from sharing_server.config import ServerConfig


@dataclass
class OpenedBackends:
    """What a server runs on, opened from its configuration: the share store, the object storage,
    the configured catalogs and the server key (`sharing_server.services.AppServices` is what
    the app makes of them)."""

    config: ServerConfig
    store: ShareStore
    storage: ObjectStorage
    catalogs: CatalogRegistry
    secret: bytes

    def close(self) -> None:
        self.store.close()


def prepare_disk(config: ServerConfig) -> None:
    """Make the folders the configuration names; each exists after this, empty or not."""
    if not config.store_url or not config.secret_key or config.embedded_warehouse is not None:
        config.data_dir.mkdir(parents=True, exist_ok=True)
    if config.is_local:
        config.storage_root().mkdir(parents=True, exist_ok=True)
    if config.embedded_warehouse is not None:
        config.embedded_warehouse.mkdir(parents=True, exist_ok=True)


def server_secret(config: ServerConfig) -> bytes:
    """The key for signed URLs and page tokens (replicas must share it), made on first start."""
    if config.secret_key:
        return config.secret_key.encode()
    path = config.key_file
    if not path.exists():
        # Written aside and linked into place, so that worker processes starting
        # together never read a half-written key: the first link wins.
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
        except OSError as error:  # a full disk: say which file could not be written
            draft.unlink(missing_ok=True)
            raise OSError(error.errno, error.strerror, str(path)) from error
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip().encode()


def open_services(config: ServerConfig) -> OpenedBackends:
    # Checked before anything is opened: a catalog whose `${VAR}` is not set or whose
    # driver is not installed stops the start in one line (CatalogError), not at first use.
    catalogs = config.make_catalogs()
    catalogs.verify()
    prepare_disk(config)
    secret = server_secret(config)
    store = ShareStore(config.resolved_store_url())
    return OpenedBackends(config, store, config.make_storage(secret), catalogs, secret)


def build_app(services: OpenedBackends) -> Starlette:
    config = services.config
    return create_app(
        services.store,
        services.storage,
        services.secret,
        config.prefix,
        services.catalogs,
        config.options,
    )
