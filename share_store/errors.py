"""Errors whose messages are safe to show to a recipient.

    ShareStoreError                 base: error_code + HTTP status + safe message
    ├── NotFound                    404 RESOURCE_DOES_NOT_EXIST: a share, table, token or client named
    │                               is not there (the store raises only this one, for every caller)
    ├── InvalidParameter            400 INVALID_PARAMETER_VALUE
    ├── MalformedRequest            400 MALFORMED_REQUEST
    ├── UnsupportedOperation        400 UNSUPPORTED_OPERATION
    ├── TableFilesMissing           400 RESOURCE_DOES_NOT_EXIST "table files missing" (and how many)
    ├── TableLogDamaged             500 INTERNAL_ERROR: a gap or a corrupt commit in the log, named
    │                               by version (told to the recipient, logged for the provider)
    ├── Unauthenticated             401 UNAUTHENTICATED: no proof, or one that does not hold (a bearer
    │                               token, a catalog user's token, the admin token)
    ├── Forbidden                   403 PERMISSION_DENIED: the proof holds (or the URL carries its
    │   │                           own), what it asks for is not allowed (a policy, a file URL's
    │   │                           signature, a signing grant, a named recipient's token at /iceberg)
    │   └── SignatureRejected       403 a SigV4 signature missing, malformed, stale or wrong (as S3
    │                               answers it), the canonical request kept for the server's log
    ├── RateLimited                 429 TOO_MANY_REQUESTS, with Retry-After (`retry_after` seconds):
    │                               a throttled sign-in, a token over its rate
    ├── StorageUnavailable          503 TEMPORARILY_UNAVAILABLE
    │   └── DerivationPending       503 with Retry-After: a restricted table's files are being derived
    ├── StoreDiskFull               503 TEMPORARILY_UNAVAILABLE: the share store has no space left
    ├── CatalogError                500 INTERNAL_ERROR: a configured Iceberg catalog's settings are
    │                               wrong, or it cannot load (a driver not installed); names the
    │                               catalog and the key or module, never a value
    └── AdminError                  400 bad admin input (CLI exit code 2), never half-applied
        ├── AdminNotFound           404 a NotFound met by an admin command (sharing_server.admin.commands)
        └── AdminConflict           409 the name is already taken

These are the refusals of every surface: each answers them in its own error model
(`sharing_server.http.errors` the Delta Sharing one, `sharing_server.http.iceberg_errors` the
Iceberg REST one, whose `type` is the class's `iceberg_type` where it has one). The server's own
refusals (body size, a disabled admin API, a busy process) and configuration errors live in
`sharing_server.http.errors`.

Anything else raised while serving a request is an internal error whose text
is hidden from the recipient, since it may carry paths or credentials.
"""

from __future__ import annotations


class ShareStoreError(Exception):
    error_code = "INTERNAL_ERROR"
    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ShareStoreError):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404


class InvalidParameter(ShareStoreError):
    error_code = "INVALID_PARAMETER_VALUE"
    status_code = 400


class MalformedRequest(ShareStoreError):
    error_code = "MALFORMED_REQUEST"
    status_code = 400


class UnsupportedOperation(ShareStoreError):
    error_code = "UNSUPPORTED_OPERATION"
    status_code = 400


class TableFilesMissing(ShareStoreError):
    # The reference server answers 400 (not 404) for missing table files;
    # clients' tests grep for this exact code and text.
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 400

    def __init__(self, message: str = "table files missing") -> None:
        super().__init__(message)

    @classmethod
    def counted(cls, missing: int) -> TableFilesMissing:
        """Files a version needs that storage no longer has (vacuumed or lost), with how many."""
        files = "file is" if missing == 1 else "files are"
        return cls(f"table files missing: {missing:,} {files} no longer in storage (vacuumed or lost)")


class TableLogDamaged(ShareStoreError):
    """The provider's log cannot be replayed: a gap in its commits, or a commit not JSON.

    `detail` names versions only (which commit is missing, which is not JSON),
    never a path: the recipient is told it, and the server's log keeps it for the provider.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"The table's log cannot be read: {detail}.")
        self.detail = detail


class Unauthenticated(ShareStoreError):
    """No proof, or one that does not hold: the protocol's 401, the Iceberg REST spec's too."""

    error_code = "UNAUTHENTICATED"
    status_code = 401
    iceberg_type = "NotAuthorizedException"

    def __init__(self, message: str, token_id: str | None = None, share: str | None = None) -> None:
        super().__init__(message)
        #: A token that is known but revoked or expired: the audit line and Activity name it.
        self.token_id = token_id
        self.share = share


class Forbidden(ShareStoreError):
    """The caller may not: its policy, a file URL's or a signing grant's signature, its kind of token."""

    error_code = "PERMISSION_DENIED"
    status_code = 403
    iceberg_type = "ForbiddenException"


class SignatureRejected(Forbidden):
    """A request whose SigV4 signature is missing, malformed, stale or wrong; the message says which."""

    def __init__(self, message: str, canonical_request: str | None = None) -> None:
        super().__init__(message)
        #: For a signature that does not match, the canonical request we signed, for the server's log.
        self.canonical_request = canonical_request


class RateLimited(ShareStoreError):
    """Too many attempts or requests: come back in `retry_after` seconds (answered as `Retry-After`)."""

    error_code = "TOO_MANY_REQUESTS"
    status_code = 429

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StorageUnavailable(ShareStoreError):
    error_code = "TEMPORARILY_UNAVAILABLE"
    status_code = 503


class DerivationPending(StorageUnavailable):
    """A restricted table's derived files are still being written: come back in `retry_after`
    seconds (answered as `Retry-After`); the work goes on meanwhile, and no part is served."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreDiskFull(ShareStoreError):
    """The share store's disk (or quota) is full: reads work, writes fail until space is freed.

    Not an outage, which passes by itself: someone must free space. Still 503,
    since the same request succeeds once they have.
    """

    error_code = "TEMPORARILY_UNAVAILABLE"
    status_code = 503

    def __init__(self, message: str = "the share store has no space left on its disk") -> None:
        super().__init__(message)


class CatalogError(ShareStoreError):
    """A configured Iceberg catalog cannot be used: a setting is wrong, or the catalog does not load.

    Told in one line naming the catalog and the setting or module at fault, and no
    setting's value (values hold credentials): the CLI and start-up print it
    (exit status 2), a recipient whose table needs the catalog gets it as a 500.
    """


class AdminError(ShareStoreError):
    """Bad input to an admin command: reported on one line, store untouched."""

    error_code = "INVALID_PARAMETER_VALUE"
    status_code = 400


class AdminNotFound(AdminError):
    error_code = "RESOURCE_DOES_NOT_EXIST"
    status_code = 404


class AdminConflict(AdminError):
    error_code = "RESOURCE_ALREADY_EXISTS"
    status_code = 409
