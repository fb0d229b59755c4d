"""A batch delete's body as the writers' signers read it (`share_store.signing.batch_deletes`), and
the request built for it (`parse_object_request`): every key named, the body's hash signed."""

from __future__ import annotations

import hashlib

import pytest

from share_store.signing.batch_deletes import MAX_KEYS, BatchRefused, deleted_keys
from share_store.signing.request_signing import HeaderSigner, SigningRefused, parse_object_request

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
ENDPOINT = "http://store:9000"


def body(*keys: str, namespace: str = NS) -> bytes:
    objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    return f'<?xml version="1.0"?><Delete xmlns="{namespace}">{objects}<Quiet>false</Quiet></Delete>'.encode()


def test_the_keys_are_read_in_order_with_or_without_s3s_namespace() -> None:
    assert deleted_keys(body("a/b", "a/c")) == ["a/b", "a/c"]
    assert deleted_keys(b"<Delete>\n <Object><Key>k</Key></Object>\n</Delete>") == ["k"]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not xml",
        b"<Delete></Delete>",
        body("k", namespace="urn:other"),
        b"<Delete><Object><Key>k</Key><VersionId>1</VersionId></Object></Delete>",
        b"<Delete><Object><Key>k</Key></Object><Extra/></Delete>",
        b"<Delete><Object><Key a='1'>k</Key></Object></Delete>",
        b"<Delete><Object><Key></Key></Object></Delete>",
        b"<Delete>text<Object><Key>k</Key></Object></Delete>",
        b'<!DOCTYPE Delete [<!ENTITY k "a/b">]><Delete><Object><Key>&k;</Key></Object></Delete>',
        b"<Delete><!-- c --><Object><Key>k</Key></Object></Delete>",
        b"<Deletes><Object><Key>k</Key></Object></Deletes>",
        body(*[f"k{n}" for n in range(MAX_KEYS + 1)]),
    ],
)
def test_any_other_body_is_refused(raw: bytes) -> None:
    with pytest.raises(BatchRefused):
        deleted_keys(raw)


def test_the_request_names_every_key_and_signs_the_bodys_hash() -> None:
    raw = body("t/data/a.parquet", "t/data/b.parquet")
    request = parse_object_request("POST", f"{ENDPOINT}/wh?delete", {}, ENDPOINT, writes=True, body=raw)
    assert request.uri == f"{ENDPOINT}/wh?delete"
    assert request.objects() == [("wh", "t/data/a.parquet"), ("wh", "t/data/b.parquet")]
    signed = HeaderSigner("us-east-1", "AKIA", "secret").sign(request)
    assert signed["x-amz-content-sha256"] == [hashlib.sha256(raw).hexdigest()]
    # A key with dot segments, no body, or a reader's signer: refused.
    with pytest.raises(SigningRefused):
        parse_object_request("POST", f"{ENDPOINT}/wh?delete", {}, ENDPOINT, writes=True, body=body("t/../u"))
    with pytest.raises(SigningRefused):
        parse_object_request("POST", f"{ENDPOINT}/wh?delete", {}, ENDPOINT, writes=True)
    with pytest.raises(SigningRefused):
        parse_object_request("POST", f"{ENDPOINT}/wh?delete", {}, ENDPOINT, body=raw)
