"""Redaction by shape: the secrets a path, a query or a header may carry, and nothing else.

The end-to-end proof is `tests/end_to_end/test_secrets_in_logs.py`; these are the shapes it
cannot try one by one: paths under a root path, names that look like the secrets' routes, and
the access log's atoms that our format leaves out but an operator's may name.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from sharing_server.observability.redaction import redact_path, redact_query
from sharing_server.service_options import ServiceOptions
from sharing_server.serving import hypercorn_config

GRANT = "eyJiIjoid2gifQ." + secrets.token_urlsafe(16)
CODE = secrets.token_urlsafe(32)


@pytest.mark.parametrize(
    ("path", "redacted"),
    [
        (f"/_iceberg/v1/wh/s3-sign/{GRANT}", "/_iceberg/v1/wh/s3-sign/…"),
        (f"/api/_iceberg/v1/wh/s3-sign/{GRANT}", "/api/_iceberg/v1/wh/s3-sign/…"),  # under a root path
        (f"/_iceberg/v1/wh/s3-sign/{GRANT}/more", "/_iceberg/v1/wh/s3-sign/…"),
        (f"/delta-sharing/activation/{CODE}", "/delta-sharing/activation/…"),
        (f"/activation/{CODE}", "/activation/…"),  # an empty protocol prefix
    ],
)
def test_secrets_in_paths_are_redacted(path: str, redacted: str) -> None:
    assert redact_path(path) == redacted


@pytest.mark.parametrize(
    "path",
    [
        "/_iceberg/v1/wh/namespaces/s3-sign/tables/t",  # a namespace named like the signer
        "/delta-sharing/shares/activation/schemas/activation/tables/t",
        "/delta-sharing/shares/s/schemas/activation/tables",
        "/admin/v1/recipients/activation/tokens",
        "/iceberg/v1/aws/s3/sign",
    ],
)
def test_paths_without_secrets_are_left_as_they_are(path: str) -> None:
    assert redact_path(path) == path


def test_signing_and_credential_query_parameters_are_redacted() -> None:
    query = "X-Sharing-Expires=17&X-Amz-Signature=abc123&x-amz-security-token=tok&part=2"
    assert redact_query(query) == "X-Sharing-Expires=17&X-Amz-Signature=…&x-amz-security-token=…&part=2"


def test_the_access_log_redacts_every_atom_that_could_hold_a_secret() -> None:
    config = hypercorn_config(ServiceOptions())
    config.access_log_format = "%(r)s %(R)s %(U)s %(Uq)s %(q)s %({authorization}i)s %({set-cookie}o)s %(s)s"
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"/_iceberg/v1/wh/s3-sign/{GRANT}",
        "query_string": b"X-Amz-Signature=deadbeef",
        "headers": [(b"authorization", b"Bearer " + GRANT.encode())],
        "client": ("127.0.0.1", 5000),
    }
    response: Any = {"status": 200, "headers": [(b"set-cookie", b"console_session=" + CODE.encode())]}
    line = config.access_log_format % config.log.atoms(scope, response, 0.01)
    assert GRANT not in line and CODE not in line and "deadbeef" not in line
    assert "/s3-sign/…" in line and "X-Amz-Signature=…" in line and " 200" in line
