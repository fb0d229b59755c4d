"""Where deltalake finds a table the server shares, for tests and bench that write or read it directly.

The server never opens tables with deltalake; tests and benchmarks do, to write new versions
and to compare what recipients get with what the table holds.
"""

from __future__ import annotations

from share_store.storage.base import ObjectStorage
from share_store.storage.local import LocalStorage
from share_store.storage.s3 import S3Storage


def table_uri(storage: ObjectStorage, bucket: str, path: str) -> str:
    """The URI deltalake opens the table at `path` in `bucket`."""
    if isinstance(storage, LocalStorage):
        directory = storage.resolve(bucket, path)
        if directory is None:
            raise FileNotFoundError(f"{bucket}/{path}")
        return str(directory)
    if isinstance(storage, S3Storage):
        return f"s3://{bucket}/{path}"
    raise TypeError(f"no deltalake URI for {type(storage).__name__}")


def deltalake_options(storage: ObjectStorage) -> dict[str, str]:
    """deltalake's storage options (endpoint, credentials) for the storage's buckets."""
    if isinstance(storage, LocalStorage):
        return {}
    if isinstance(storage, S3Storage):
        s = storage.settings
        options = {"AWS_REGION": s.region}
        if s.endpoint:
            options["AWS_ENDPOINT_URL"] = s.endpoint
            if s.endpoint.startswith("http://"):
                options["AWS_ALLOW_HTTP"] = "true"
        if s.access_key:
            options["AWS_ACCESS_KEY_ID"] = s.access_key
        if s.secret_key:
            options["AWS_SECRET_ACCESS_KEY"] = s.secret_key
        if s.session_token:
            options["AWS_SESSION_TOKEN"] = s.session_token
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if s.path_style else "true"
        return options
    raise TypeError(f"no deltalake options for {type(storage).__name__}")
