"""The body of an Iceberg REST remote-signing request, read off the wire for both signers
(the recipients' at `/iceberg/v1/aws/s3/sign`, the writers' at `/_iceberg/v1/{prefix}/s3-sign/...`,
and the spec's at `.../namespaces/{ns}/tables/{t}/sign` in both catalogs).

pyiceberg's `S3V4RestSigner` and the Java client's signer POST the S3 request they would send,
without credentials, as `{"method", "uri", "headers": {name: [values]}, ...}`. This module only
checks that shape and hands on a `SignRequest`; which object and operation it names, and whether it
is signed, is decided below (`share_store.signing.request_signing`).
"""

from __future__ import annotations

from typing import NamedTuple

from share_store.errors import InvalidParameter
from sharing_server.http import json_text


class SignRequest(NamedTuple):
    """One S3 request as a client asks to have it signed: its method, URI and headers (name → values)."""

    method: str
    uri: str
    headers: dict[str, list[str]]


def parse_sign_request(raw: bytes) -> SignRequest:
    """A remote-signing request's method, URI and headers (name → values), as the Iceberg clients
    send them; `InvalidParameter` for anything else."""
    return parse_sign_request_with_body(raw)[0]


def parse_sign_request_with_body(raw: bytes) -> tuple[SignRequest, bytes | None]:
    """`parse_sign_request`, and the request's `body` (a batch delete's, which the writers' signers
    read for the keys it deletes) as bytes, when sent."""
    try:
        body = json_text.json_object(raw)
    except json_text.NotAJsonObject as refused:
        # JSON may carry lone surrogates (`\ud800`), which no request can hold.
        if refused.problem == "lone surrogate":
            raise InvalidParameter("the signing request's strings must be valid Unicode") from None
        raise InvalidParameter("the signing request must be a JSON object") from None
    method, uri, headers = body.get("method"), body.get("uri"), body.get("headers", {})
    valid_headers = isinstance(headers, dict) and all(
        isinstance(name, str) and isinstance(values, list) and all(isinstance(v, str) for v in values)
        for name, values in headers.items()
    )
    if not isinstance(method, str) or not isinstance(uri, str) or not valid_headers:
        raise InvalidParameter("the signing request needs 'method', 'uri' and 'headers' (name → [values])")
    # Iceberg 1.11's `RemoteSignRequest`: `provider` is the storage's scheme, `s3` when unsaid (the
    # only storage these signers sign for); `region` the client's (the store's own is signed with).
    provider = body.get("provider", "s3")
    if not isinstance(provider, str) or provider.lower() != "s3":
        raise InvalidParameter(f"this signer signs S3 requests only (provider 's3'), not {provider!r}")
    for name in ("region", "body"):
        if not isinstance(body.get(name, ""), str):
            raise InvalidParameter(f"the signing request's {name!r} must be a string")
    sent = body.get("body")
    return SignRequest(method, uri, headers), sent.encode() if sent is not None else None
