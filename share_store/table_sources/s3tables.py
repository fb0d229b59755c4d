"""A read-only Iceberg catalog over the AWS S3 Tables API: `S3TablesCatalog`.

An S3 Tables "table bucket" holds single-level namespaces of Iceberg tables; the
API (boto3's `s3tables` client) says where each table's current metadata file is
(`GetTableMetadataLocation`), and pyiceberg reads that file and the manifests with
its own FileIO. Properties:

    sharing.table-bucket-arn = "arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME"   # required
    sharing.endpoint-url     = "http://seaweed:8333"   # the S3 Tables API (default: AWS's)
    client.region            = "us-east-1"             # default: the ARN's region
    client.access-key-id / client.secret-access-key / client.session-token
                                                       # default: boto3's provider chain
    s3.endpoint, s3.access-key-id, s3.secret-access-key, s3.region, s3.force-virtual-addressing
                                                       # pyiceberg's FileIO for the table files

Every `load_table` asks the API afresh, so a table follows its writers' commits.
A missing table or namespace is pyiceberg's `NoSuchTableError`/`NoSuchNamespaceError`;
a bad setting or refused credentials a `CatalogError`, an unreachable endpoint
`StorageUnavailable`, each in one line naming no secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier

from share_store.errors import CatalogError, StorageUnavailable

ARN_KEY = "sharing.table-bucket-arn"
ENDPOINT_KEY = "sharing.endpoint-url"
#: arn:PARTITION:s3tables:REGION:ACCOUNT:bucket/NAME
TABLE_BUCKET_ARN = re.compile(r"^arn:aws[a-z-]*:s3tables:([a-z0-9-]*):([^:]+):bucket/([a-z0-9][a-z0-9-]*)$")
#: Error codes meaning the credentials are missing, wrong or not allowed.
CREDENTIAL_CODES = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "ForbiddenException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
NOT_FOUND_CODES = frozenset(
    {"NotFoundException", "NoSuchTable", "NoSuchNamespace", "NoSuchTableBucket", "NoSuchBucket"}
)
#: Fail within seconds when the API does not answer, as the registry's other catalogs do.
CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"})


def parse_table_bucket_arn(arn: str, where: str = ARN_KEY) -> tuple[str, str, str]:
    """(region, account, bucket name) of a table bucket ARN; CatalogError naming `where` if it is not one."""
    match = TABLE_BUCKET_ARN.match(arn.strip())
    if match is None:
        raise CatalogError(f"{where}: not a table bucket ARN (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)")
    region, account, bucket = match.groups()
    return region, account, bucket


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class S3TablesCatalog(NoopCatalog):
    """The tables of one S3 Tables table bucket, read-only (every writing method is the Noop's)."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        where = f"[catalogs.{name}]"
        arn = properties.get(ARN_KEY, "").strip()
        if not arn:
            raise CatalogError(f"{where} {ARN_KEY}: required for an S3 Tables catalog")
        arn_region, _, self.bucket = parse_table_bucket_arn(arn, f"{where} {ARN_KEY}")
        self.table_bucket_arn = arn
        self.endpoint_url = properties.get(ENDPOINT_KEY) or None
        region = properties.get("client.region") or arn_region
        if not region:
            raise CatalogError(f"{where} client.region: needed, since {ARN_KEY} names no region")
        self.region = region
        self._where = where
        #: Whether the endpoint serves `GetTableMetadataLocation` (else `GetTable` is asked).
        self._metadata_location_routed = True
        credentials = {
            "aws_access_key_id": properties.get("client.access-key-id"),
            "aws_secret_access_key": properties.get("client.secret-access-key"),
            "aws_session_token": properties.get("client.session-token"),
        }
        try:
            self._client = boto3.client(
                "s3tables",
                endpoint_url=self.endpoint_url,
                region_name=region,
                config=CLIENT_CONFIG,
                **{key: value for key, value in credentials.items() if value},
            )
        except ValueError:  # botocore's "Invalid endpoint"
            raise CatalogError(f"{where} {ENDPOINT_KEY}: not a URL boto3 can use") from None

    # --- the API, with its failures told in one line -------------------------------------------

    def _fail(self, error: Exception, not_found: Callable[[], Exception] | None) -> NoReturn:
        """Raise what `error`, from the S3 Tables API, means: `not_found()`, or a one-line error."""
        endpoint = re.sub(r"//[^/@]*@", "//", self.endpoint_url or "")  # no user:password@
        api = f"the S3 Tables API{f' at {endpoint}' if endpoint else ''}"
        if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
            raise CatalogError(
                f"{self._where}: no credentials for {api} (set client.access-key-id and "
                "client.secret-access-key, or give boto3 its own)"
            ) from None
        if isinstance(error, (BotoConnectionError, HTTPClientError)):
            raise StorageUnavailable(f"{api} is unreachable; try again later") from error
        if isinstance(error, ClientError):
            code = _error_code(error)
            if code in NOT_FOUND_CODES or _status(error) == 404:
                if not_found is not None:
                    raise not_found() from None
                raise CatalogError(
                    f"{self._where} {ARN_KEY}: {api} has no table bucket '{self.bucket}'"
                ) from None
            if code in CREDENTIAL_CODES or _status(error) in (401, 403):
                raise CatalogError(
                    f"{self._where}: {api} refused the credentials for table bucket '{self.bucket}' ({code})"
                ) from None
            if _status(error) >= 500 or code in ("TooManyRequestsException", "InternalServerErrorException"):
                raise StorageUnavailable(f"{api} is unavailable ({code}); try again later") from error
            raise CatalogError(
                f"{self._where}: {api} refused the request ({code or _status(error)})"
            ) from None
        if isinstance(error, BotoCoreError):
            raise CatalogError(f"{self._where}: {api} failed ({type(error).__name__})") from None
        raise error

    def _call(self, operation: str, not_found: Callable[[], Exception] | None, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, operation)(tableBucketARN=self.table_bucket_arn, **kwargs)
        except (ClientError, BotoCoreError) as error:
            self._fail(error, not_found)

    def _pages(
        self, operation: str, key: str, not_found: Callable[[], Exception] | None, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        """Every entry under `key` of a list operation, following `continuationToken`."""
        token: str | None = None
        while True:
            page = self._call(
                operation, not_found, **kwargs, **({"continuationToken": token} if token else {})
            )
            yield from page.get(key, [])
            token = page.get("continuationToken")
            if not token:
                return

    def _metadata_location_call(self, not_found: Callable[[], Exception], **kwargs: str) -> Any:
        """`GetTableMetadataLocation`, or `GetTable` (which also says where the metadata is) from a
        server that does not route the former: SeaweedFS answers it as an S3 request, in XML."""
        if not self._metadata_location_routed:
            return self._call("get_table", not_found, **kwargs)
        try:
            return self._client.get_table_metadata_location(tableBucketARN=self.table_bucket_arn, **kwargs)
        except ClientError as error:
            headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            if _status(error) != 404 or "xml" not in str(headers.get("content-type", "")):
                self._fail(error, not_found)
            self._metadata_location_routed = False
            return self._call("get_table", not_found, **kwargs)
        except BotoCoreError as error:
            self._fail(error, not_found)

    # --- identifiers -------------------------------------------------------------------------

    def _table_parts(self, identifier: str | Identifier) -> tuple[str, str]:
        """(namespace, name) of a table; NoSuchTableError for one no S3 Tables table can have."""
        parts = self.identifier_to_tuple(identifier)
        if len(parts) != 2:
            raise NoSuchTableError(
                f"S3 Tables namespaces have one level: no table {'.'.join(parts)}"
                f" in table bucket '{self.bucket}'"
            )
        return parts[0], parts[1]

    def metadata_location(self, identifier: str | Identifier) -> str:
        """Where the table's current metadata file is, as the API says now."""
        namespace, name = self._table_parts(identifier)

        def missing() -> Exception:
            return NoSuchTableError(
                f"Table does not exist: {namespace}.{name} in table bucket '{self.bucket}'"
            )

        found = self._metadata_location_call(missing, namespace=namespace, name=name)
        location = found.get("metadataLocation")
        if not location:  # made, but never committed to
            raise missing()
        return str(location)

    # --- pyiceberg's Catalog, read-only ----------------------------------------------------------

    def load_table(self, identifier: str | Identifier) -> Table:
        namespace, name = self._table_parts(identifier)
        location = self.metadata_location((namespace, name))
        io = load_file_io(self.properties, location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return Table((namespace, name), metadata, location, io, catalog=self)

    def table_exists(self, identifier: str | Identifier) -> bool:
        try:
            self.metadata_location(identifier)
        except NoSuchTableError:
            return False
        return True

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        levels = self.identifier_to_tuple(namespace) if namespace else ()
        found = [tuple(entry["namespace"]) for entry in self._pages("list_namespaces", "namespaces", None)]
        if not levels:
            return [names for names in found if names]
        if levels not in found:
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(levels)}")
        return []  # single-level: nothing under a namespace

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        levels = self.identifier_to_tuple(namespace)
        if len(levels) != 1:
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(levels)}")

        def missing() -> Exception:
            return NoSuchNamespaceError(f"Namespace does not exist: {levels[0]}")

        tables = self._pages("list_tables", "tables", missing, namespace=levels[0])
        return [(levels[0], str(entry["name"])) for entry in tables]

    def namespace_exists(self, namespace: str | Identifier) -> bool:
        levels = self.identifier_to_tuple(namespace)
        return len(levels) == 1 and levels in self.list_namespaces()

    def load_namespace_properties(self, namespace: str | Identifier) -> dict[str, str]:
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(
                f"Namespace does not exist: {'.'.join(self.identifier_to_tuple(namespace))}"
            )
        return {}

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        return []
