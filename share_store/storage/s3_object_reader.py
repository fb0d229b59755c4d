"""An S3 object opened as a seekable file (`S3Storage.open`), read by ranged GETs."""

from __future__ import annotations

import io
from typing import Any

from share_store.storage.s3_errors import ABSENT, s3_errors


class S3ObjectReader(io.RawIOBase):
    """An S3 object as a seekable file: each read is one ranged GET.

    A Parquet reader reads the footer, then the column chunks it projects, so a few
    columns of a large file cost a few requests and only their bytes.
    """

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        super().__init__()
        self._client, self._bucket, self._key = client, bucket, key
        self._position = 0
        self.size = int(self._call(client.head_object, Bucket=bucket, Key=key)["ContentLength"])

    def _call(self, method: Any, **arguments: Any) -> Any:
        with s3_errors((ABSENT, FileNotFoundError(f"{self._bucket}/{self._key}"))):
            return method(**arguments)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._position + size)
        if end <= self._position:
            return b""
        response = self._call(
            self._client.get_object,
            Bucket=self._bucket,
            Key=self._key,
            Range=f"bytes={self._position}-{end - 1}",
        )
        data: bytes = response["Body"].read()
        self._position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
