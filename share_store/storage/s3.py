"""S3-compatible object storage (AWS, MinIO/AIStor, SeaweedFS, Ceph) with SigV4 URLs.

Two endpoints: `endpoint` is where this server reads (often a private address),
`public_endpoint` is what recipients reach, and is the host presigned URLs are
signed for. The reference server signs for its own endpoint only (its bug #753).
"""

from __future__ import annotations

import builtins  # `list` is a method of storages, so the type is spelled in full
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, cast

import boto3
import pyarrow as pa
import urllib3
from botocore.config import Config
from botocore.exceptions import ClientError

from share_store.errors import StorageUnavailable
from share_store.signing.sigv4 import Credentials, S3Presigner
from share_store.storage.base import BatchSigning, ObjectInfo, ObjectStorage, ObjectTooLarge, UrlSigning
from share_store.storage.s3_errors import (
    ABSENT,
    ELSEWHERE,
    NO_BUCKET,
    Meaning,
    Rule,
    error_code,
    permission_denied,
    s3_errors,
)
from share_store.storage.s3_object_reader import S3ObjectReader
from share_store.storage.s3_signed_requests import (
    ListingPage,
    NoSuchBucket,
    list_page,
    listed_keys,
    listing_page,
    object_request,
)

# A missing-file check lists the keys it looks for in ranges of this many, each from
# the key before the range on, all at once: one page each when the keys are dense. A
# table of 100,000 files is checked in the time of a few pages, not of 100 in a row.
CHECK_RANGE_KEYS = 1000
CHECK_THREADS = 16
#: How long a URL signed for one of the server's own requests is good for: it is sent at once.
OWN_URL_SECONDS = 60
_DOT_SEGMENTS = frozenset({".", ".."})


@dataclass(frozen=True)
class S3Settings:
    endpoint: str | None = None
    public_endpoint: str | None = None
    region: str = "us-east-1"
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    path_style: bool = True
    # For this server's own reads (listings, commits, checkpoints) only: a recipient
    # waiting on a request should get a 503 within seconds when storage is down, not
    # after botocore's defaults (60 s timeouts, several attempts). Presigned URLs are
    # fetched by recipients and are not affected.
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    max_attempts: int = 2


class S3Storage(ObjectStorage):
    #: A SigV4 URL's canonical request and the URL around its signature, put together by Arrow for
    #: a batch, cost a third of that string work key by key (a warm /query of 100,000 files spent
    #: 250 of its 350 ms signing). Local URLs sign so short a message that key by key is as fast.
    batch_signs_faster = True

    def __init__(self, settings: S3Settings, url_lifetime: int = 3600) -> None:
        self.settings = settings
        self.url_lifetime = url_lifetime
        self._client = self._make_client(settings.endpoint)
        # For listing pages by URL (see `_listed`); as many connections as listing threads.
        self._http = urllib3.PoolManager(maxsize=CHECK_THREADS)
        self._timeout = urllib3.Timeout(connect=settings.connect_timeout, read=settings.read_timeout)
        signing_endpoint = settings.public_endpoint or settings.endpoint
        self._presigner: S3Presigner | None = None
        if signing_endpoint and settings.access_key and settings.secret_key and settings.path_style:
            # The fast signer covers the common case byte for byte; anything else
            # (AWS's regional endpoints, virtual hosts, role credentials) goes to botocore.
            credentials = Credentials(settings.access_key, settings.secret_key, settings.session_token)
            self._presigner = S3Presigner(signing_endpoint, settings.region, credentials)
        # botocore signs only what the fast signer does not cover.
        self._signing_client = None if self._presigner else self._make_client(signing_endpoint)
        # The server's own writes and single deletes (a catalog commit's metadata file, the one it
        # replaced), by a URL signed for the endpoint it reaches: see `_object_request`.
        self._own_signer: S3Presigner | None = None
        if signing_endpoint == settings.endpoint:
            self._own_signer = self._presigner  # no public endpoint: the one signer serves both
        elif settings.endpoint and settings.access_key and settings.secret_key and settings.path_style:
            credentials = Credentials(settings.access_key, settings.secret_key, settings.session_token)
            self._own_signer = S3Presigner(settings.endpoint, settings.region, credentials)

    def _make_client(self, endpoint: str | None) -> Any:  # boto3 makes its client classes at run time
        return boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=self.settings.region,
            aws_access_key_id=self.settings.access_key,
            aws_secret_access_key=self.settings.secret_key,
            aws_session_token=self.settings.session_token,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path" if self.settings.path_style else "virtual"},
                retries={"max_attempts": self.settings.max_attempts, "mode": "standard"},
                connect_timeout=self.settings.connect_timeout,
                read_timeout=self.settings.read_timeout,
                max_pool_connections=CHECK_THREADS,
            ),
        )

    def list(self, bucket: str, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        if self._lists_own(bucket):
            for page in self._listing(bucket, prefix, start_after):
                yield from page.objects
            return
        paginator = self._client.get_paginator("list_objects_v2")
        extra = {"StartAfter": start_after} if start_after else {}
        with s3_errors(({"NoSuchBucket"}, None)):  # no bucket: nothing in it
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/", **extra):
                for item in page.get("Contents", []):
                    yield ObjectInfo(
                        key=item["Key"],
                        size=item["Size"],
                        modified_ms=int(item["LastModified"].timestamp() * 1000),
                    )

    def folders(self, bucket: str, prefix: str) -> builtins.list[str]:
        if self._lists_own(bucket):
            return [folder for page in self._listing(bucket, prefix, None) for folder in page.prefixes]
        paginator = self._client.get_paginator("list_objects_v2")
        with s3_errors(({"NoSuchBucket"}, None)):
            return [
                common["Prefix"]
                for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/")
                for common in page.get("CommonPrefixes", [])
            ]
        return []  # no bucket: no folders

    def _lists_own(self, bucket: str) -> bool:
        """Whether listings of `bucket` go by URLs our signer signs (`_listing`)."""
        return self._own_signer is not None and bucket not in _DOT_SEGMENTS

    def _listing(self, bucket: str, prefix: str, start_after: str | None) -> Iterator[ListingPage]:
        """The pages of a listing of `prefix` one level deep, by URLs our signer signs and read by
        hand (`listing_page`, which says why); no bucket lists nothing, as with botocore."""
        assert self._own_signer is not None
        attempts = max(self.settings.max_attempts, 1)
        asked = [("prefix", prefix), ("delimiter", "/"), ("encoding-type", "url")]
        params = asked + ([("start-after", start_after)] if start_after else [])
        while True:
            url = self._own_signer.presign_listing(bucket, params, OWN_URL_SECONDS)
            try:
                page = listing_page(list_page(self._http, self._timeout, attempts, url))
            except NoSuchBucket:
                return
            except ValueError as error:
                raise StorageUnavailable("object storage answered a listing that is not one") from error
            yield page
            if page.next_token is None:
                return
            # The token carries on from where the page ended, `start-after` included.
            params = [*asked, ("continuation-token", page.next_token)]

    def read(self, bucket: str, key: str) -> bytes:
        if self._signs_own(bucket, key):
            # By a URL our signer signs: a never-read table's first reader waits for its commits
            # (`object_request` says what it saves).
            data = self._object_request("GET", bucket, key, None, "GetObject", (ABSENT, None))
            if data is None:
                raise FileNotFoundError(f"{bucket}/{key}")
            return data
        with s3_errors((ABSENT, FileNotFoundError(f"{bucket}/{key}"))):
            return self._client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def read_at_most(self, bucket: str, key: str, limit: int) -> bytes:
        # One GET, as `read` makes (not a HEAD first): its length is known before its body is
        # read, and a body larger than it said is cut at `limit + 1` bytes all the same.
        with s3_errors((ABSENT, FileNotFoundError(f"{bucket}/{key}"))):
            response = self._client.get_object(Bucket=bucket, Key=key)
            body = response["Body"]
            try:
                size = response.get("ContentLength")
                if isinstance(size, int) and size > limit:
                    raise ObjectTooLarge(bucket, key, limit, size)
                data: bytes = body.read(limit + 1)
            finally:
                body.close()
        if len(data) > limit:
            raise ObjectTooLarge(bucket, key, limit, None)
        return data

    def bucket_exists(self, bucket: str) -> bool:
        # Forbidden: someone else's bucket (names are global on AWS), or keys the store
        # refuses, which a bodiless 403 cannot tell apart. Taken as there (no failure): the
        # catalog then refuses the name rather than take over another's bucket.
        try:
            with s3_errors((NO_BUCKET, FileNotFoundError(bucket)), (ELSEWHERE, None)):
                self._client.head_bucket(Bucket=bucket)
        except FileNotFoundError:
            return False
        return True

    def create_bucket(self, bucket: str) -> None:
        # Ours or another's, the bucket was there already: refused, so that a bucket
        # made since the catalog's `bucket_exists` is not adopted as a new warehouse.
        # (AWS in us-east-1 answers 200 to re-creating a bucket one owns: there the
        # catalog's `bucket_exists` is the only check.) A store failing (5xx) cannot
        # create it either: that is the same OSError as any other refusal.
        taken = FileExistsError(f"bucket {bucket} already exists")

        def failed(error: ClientError) -> OSError:
            return OSError(f"cannot create bucket {bucket}: {error_code(error)}")

        with s3_errors(
            ({"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}, taken),
            denied=PermissionError(f"cannot create bucket {bucket}"),
            outage=failed,
            otherwise=failed,
        ):
            self._client.create_bucket(Bucket=bucket)

    def delete_bucket(self, bucket: str) -> bool:
        # Any answer but success (not empty, not ours to delete, failing): the bucket stays.
        with s3_errors(denied=None, outage=None, otherwise=None):
            self._client.delete_bucket(Bucket=bucket)
            return True
        return False

    def delete(self, bucket: str, keys: Iterable[str]) -> None:
        batch = list(keys)
        if len(batch) == 1 and self._signs_own(bucket, batch[0]):
            # A DELETE answers 204 whether or not the key was there, as DeleteObjects does.
            self._object_request("DELETE", bucket, batch[0], None, "DeleteObject")
            return
        with s3_errors():
            for start in range(0, len(batch), 1000):  # DeleteObjects takes 1,000 keys at most
                objects = [{"Key": key} for key in batch[start : start + 1000]]
                self._client.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})

    def write(self, bucket: str, key: str, data: bytes) -> None:
        # A PUT replaces the object atomically: readers see the old object or the new.
        refused = PermissionError(f"cannot write to bucket {bucket}")
        if self._signs_own(bucket, key):
            no_bucket = ({"NoSuchBucket"}, refused)
            self._object_request("PUT", bucket, key, data, "PutObject", no_bucket, denied=refused)
            return
        with s3_errors(({"NoSuchBucket"}, refused), denied=refused):
            self._client.put_object(Bucket=bucket, Key=key, Body=data)

    def _signs_own(self, bucket: str, key: str) -> bool:
        """Whether `key` goes by `_object_request`: not a key (or bucket) with `.` or `..`
        segments, which urllib3 would resolve in the URL (another key, and a signature that no
        longer holds); botocore sends those as they are. The catalog's own keys never have them."""
        return self._lists_own(bucket) and not _DOT_SEGMENTS.intersection(key.split("/"))

    def _object_request(
        self, method: str, bucket: str, key: str, body: bytes | None, operation: str, *rules: Rule,
        denied: Meaning = permission_denied,
    ) -> bytes | None:  # fmt: skip
        """One GET, PUT or DELETE of an object by a URL our signer signs, its answer mapped as
        botocore's (`s3_signed_requests.object_request`, which says why not through botocore)."""
        assert self._own_signer is not None
        url = self._own_signer.presign(bucket, key, OWN_URL_SECONDS, method=method)
        attempts = max(self.settings.max_attempts, 1)
        return object_request(
            self._http, self._timeout, attempts, method, url, body, operation, *rules, denied=denied
        )

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        with s3_errors((ABSENT, None)):  # absent: no information, None
            head = self._client.head_object(Bucket=bucket, Key=key)
            modified = int(head["LastModified"].timestamp() * 1000)
            return ObjectInfo(key=key, size=int(head["ContentLength"]), modified_ms=modified)
        return None

    def open(self, bucket: str, key: str) -> BinaryIO:
        return cast(BinaryIO, S3ObjectReader(self._client, bucket, key))

    def local_file(self, bucket: str, key: str) -> tuple[Path, bool]:
        # Streamed to disk: a million-file checkpoint never sits in memory whole. One GET copied
        # a megabyte at a time rather than `download_fileobj`, whose transfer manager (a HEAD, a
        # thread pool) took twice as long for a 2.5 MB checkpoint (14 against 34 ms, medians
        # on SeaweedFS): a big table's first reader waits for it.
        fd, name = tempfile.mkstemp(prefix="sharing-", suffix=".parquet")
        path = Path(name)
        try:
            with s3_errors((ABSENT, FileNotFoundError(f"{bucket}/{key}"))), os.fdopen(fd, "wb") as handle:
                body = self._client.get_object(Bucket=bucket, Key=key)["Body"]
                try:
                    shutil.copyfileobj(body, handle, 1 << 20)
                finally:
                    body.close()
        except BaseException:
            path.unlink(missing_ok=True)  # whatever failed, a download cut short is no file to hand out
            raise
        return path, True

    def missing(self, bucket: str, prefix: str, keys: Iterable[str]) -> builtins.list[str]:
        wanted = sorted(set(keys))
        if not wanted:
            return []
        ranges = [wanted[i : i + CHECK_RANGE_KEYS] for i in range(0, len(wanted), CHECK_RANGE_KEYS)]
        starts = [None] + [keys[-1] for keys in ranges[:-1]]
        try:
            with ThreadPoolExecutor(min(CHECK_THREADS, len(ranges))) as pool:
                page = partial(self._list_page, bucket, prefix)
                found = pool.map(lambda start, keys: listed_keys(page, start, keys[-1]), starts, ranges)
                present = set().union(*found)
        except NoSuchBucket:
            return wanted
        return [key for key in wanted if key not in present]

    def _list_page(self, bucket: str, prefix: str, start_after: str | None) -> bytes:
        """One ListObjectsV2 page's XML (keys URL-encoded), by a URL our signer (else botocore) signs."""
        if self._lists_own(bucket):
            assert self._own_signer is not None
            listing = [("prefix", prefix), ("encoding-type", "url")]
            listing += [("start-after", start_after)] if start_after else []
            url = self._own_signer.presign_listing(bucket, listing, OWN_URL_SECONDS)
        else:
            params = {"Bucket": bucket, "Prefix": prefix, "EncodingType": "url"}
            if start_after:
                params["StartAfter"] = start_after
            url = self._client.generate_presigned_url("list_objects_v2", Params=params, ExpiresIn=300)
        return list_page(self._http, self._timeout, max(self.settings.max_attempts, 1), url)

    def lifetime(self, now: float, wanted: int | None = None) -> int:
        """Seconds a URL signed at `now` stays valid: `wanted`, else `url_lifetime` (temporary keys
        cap it: `VendedS3Storage`)."""
        return wanted or self.url_lifetime

    def presign(self, bucket: str, key: str, now: float, lifetime: int | None = None) -> tuple[str, int]:
        seconds = self.lifetime(now, lifetime)
        if self._presigner is not None:
            url = self._presigner.presign(bucket, key, seconds)
            return url, int(now + seconds) * 1000
        assert self._signing_client is not None  # made whenever the fast signer is not
        url = self._signing_client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=seconds
        )
        # botocore signs with its own clock; `now` only sets the advertised expiry.
        return url, int(now + seconds) * 1000

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        if self._presigner is None:
            return super().url_signer(now, lifetime)
        seconds = self.lifetime(now, lifetime)
        sign, expiration = self._presigner.signing(seconds), int(now + seconds) * 1000

        def signed(bucket: str, key: str) -> tuple[str, int]:
            return sign(bucket, key), expiration

        return signed

    def batch_signer(self, now: float, lifetime: int | None = None) -> BatchSigning | None:
        if self._presigner is None:
            return None
        seconds = self.lifetime(now, lifetime)
        sign, expiration = self._presigner.batch_signing(seconds), int(now + seconds) * 1000

        def signed(bucket: str, keys: pa.Array) -> tuple[pa.Array, int]:
            return sign(bucket, keys), expiration

        return signed
