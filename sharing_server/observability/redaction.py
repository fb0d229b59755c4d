"""What no log line may hold, taken out by shape, in one place every writer of lines calls.

Most secrets never reach a line: tokens are logged by id, query strings (where local file URLs
carry their signatures) are left out, bodies and headers are not logged. Two secrets travel in a
URL path, though, which every log names:

- the writers' signing grant, `/_iceberg/v1/{prefix}/s3-sign/{grant}`: a bearer credential
  (pyiceberg's signer sends nothing else), good for an hour;
- a recipient token's one-time activation code, `{prefix}/activation/{code}`, which the first
  caller trades for the token's profile.

`redact_path` replaces them with `…`; the audit log (and so the console's activity), the error
logs, error answers that echo a path and the access log (`sharing_server.serving`) all call it.
The access log's other fields (the query string, headers such as Authorization and Cookie),
which our format leaves out but an operator's may name, go through `redact_query` and
`SECRET_HEADERS`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

from sharing_server import paths

REDACTED = "…"

#: The grant's segment and anything after it (a path spelled with more segments is no grant, but
#: may hold one); anywhere in the path, since a root path may come before the mount.
_GRANT = re.compile("(" + re.escape(paths.WAREHOUSE_PREFIX) + r"/v1/[^/]+/s3-sign/)[^?#]+")
#: `secrets.token_urlsafe(32)`, the last segment after `/activation/` (under any protocol prefix):
#: no other route ends in a segment of that name followed by such a long one.
_ACTIVATION = re.compile(r"(/activation/)[A-Za-z0-9_-]{32,}/?$")
_PATH_SECRETS = (_GRANT, _ACTIVATION)

#: Query parameters that sign or authenticate a request (SigV4 presigned URLs, local file URLs,
#: OAuth forms sent as queries); compared in lower case.
SECRET_PARAMETERS = frozenset(
    {
        "x-amz-signature",
        "x-amz-security-token",
        "x-amz-credential",
        "signature",
        "x-sharing-signature",
        "token",
        "access_token",
        "client_secret",
        "code",
    }
)
#: Request and response headers whose values are credentials.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-amz-security-token"}
)


def redact_path(path: str) -> str:
    """`path` with the secrets it may carry (a signing grant, an activation code) as `…`."""
    if "/s3-sign/" not in path and "/activation/" not in path:  # the common case, at no cost
        return path
    for shape in _PATH_SECRETS:
        path = shape.sub(r"\g<1>" + REDACTED, path)
    return path


def redact_query(query: str) -> str:
    """A query string with the values of signing and credential parameters as `…`, the rest as
    it was sent (not decoded and spelt again)."""
    if not query:
        return query
    parts = []
    for part in query.split("&"):
        name, equals, _ = part.partition("=")
        secret = equals and unquote_plus(name).lower() in SECRET_PARAMETERS
        parts.append(f"{name}={REDACTED}" if secret else part)
    return "&".join(parts)
