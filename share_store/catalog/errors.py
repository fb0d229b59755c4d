"""The writable catalog's refusals, each with the Iceberg REST error type clients expect.

The HTTP side answers them in the spec's model (`{"error": {"message", "type",
"code"}}`), taking the type from `iceberg_type`; pyiceberg and the Java client
turn the type into their own exceptions (`CommitFailedException` makes them
refresh and retry).
"""

from __future__ import annotations

from share_store.errors import ShareStoreError


class CatalogRefusal(ShareStoreError):
    error_code = "INVALID_PARAMETER_VALUE"
    status_code = 400
    iceberg_type = "BadRequestException"


class NoSuchWarehouse(CatalogRefusal):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404
    iceberg_type = "NoSuchWarehouseException"


class NoSuchNamespace(CatalogRefusal):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404
    iceberg_type = "NoSuchNamespaceException"


class NoSuchTable(CatalogRefusal):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404
    iceberg_type = "NoSuchTableException"


class NoSuchView(CatalogRefusal):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404
    iceberg_type = "NoSuchViewException"


class AlreadyExists(CatalogRefusal):
    error_code = "RESOURCE_ALREADY_EXISTS"
    status_code = 409
    iceberg_type = "AlreadyExistsException"


class NotEmpty(CatalogRefusal):
    error_code = "RESOURCE_NOT_EMPTY"
    status_code = 409
    iceberg_type = "NamespaceNotEmptyException"


class CommitConflict(CatalogRefusal):
    """A requirement failed, or another commit swapped the table first: refresh and retry."""

    error_code = "COMMIT_FAILED"
    status_code = 409
    iceberg_type = "CommitFailedException"


class MetadataFileMissing(CatalogRefusal):
    """The pointer names a metadata file storage no longer has (or that is no metadata file):
    the server's fault, not the request's, and named as such."""

    error_code = "INTERNAL_ERROR"
    status_code = 500
    iceberg_type = "ServiceFailureException"
