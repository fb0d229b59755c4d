"""S3 errors mapped in one place: `storage_error`'s table, `s3_errors`, and each S3Storage call's meanings.

botocore's answers are made by hand here (no store needed): a `ClientError` raised from the
client's one entry point, `_make_api_call`, reaches every operation, paginated or transferred
alike. The hand-written listing gets its answers from a fake connection pool.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import urllib3
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from share_store.errors import StorageUnavailable, TableFilesMissing
from share_store.storage.base import ObjectInfo
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.storage.s3_errors import client_error, s3_errors, storage_error
from share_store.storage.s3_signed_requests import listing_page

UNCHANGED = "unchanged"  # the answer raised as botocore reported it
DENIED = (TableFilesMissing, "permission denied")
DOWN = (StorageUnavailable, "object storage is unreachable; try again later")


def answer(code: str | None, status: int | None) -> ClientError:
    response: dict[str, Any] = {"Error": {} if code is None else {"Code": code, "Message": "m"}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return ClientError(response, "Op")


# -- the common meanings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("AccessDenied", 403, DENIED),
        ("403", 403, DENIED),
        ("Forbidden", 403, DENIED),
        ("InvalidAccessKeyId", 403, DENIED),
        ("SignatureDoesNotMatch", 403, DENIED),
        ("AccessDenied", 500, DENIED),  # the code first: a refusal, not an outage
        ("SlowDown", 503, DOWN),
        ("InternalError", 500, DOWN),
        ("503", 503, DOWN),
        ("NoSuchKey", 404, UNCHANGED),  # absence means something only to a call that says what
        ("NoSuchBucket", 404, UNCHANGED),
        ("InvalidArgument", 400, UNCHANGED),
        ("SomethingElse", 403, UNCHANGED),  # a 403 is a refusal by its code, not its status
        (None, None, UNCHANGED),
    ],
)
def test_common_meanings(code: str | None, status: int | None, expected: Any) -> None:
    error = answer(code, status)
    mapped = storage_error(error)
    if expected is UNCHANGED:
        assert mapped is error
    else:
        assert (type(mapped), str(mapped)) == expected


def test_rules_name_codes_before_statuses_and_the_first_rule_wins() -> None:
    first, second, by_status = FileNotFoundError("first"), FileExistsError("second"), OSError("by status")
    assert storage_error(answer("X", 404), ({404}, by_status), ({"X"}, first), ({"X"}, second)) is first
    assert storage_error(answer("Y", 404), ({404}, by_status), ({"X"}, first)) is by_status
    # A rule's code goes before the common meanings: here a DENIED code and a 5xx.
    assert storage_error(answer("AccessDenied", 503), ({"AccessDenied"}, first)) is first
    assert storage_error(answer("AccessDenied", 503), denied=second) is second
    assert storage_error(answer("SlowDown", 503), outage=second, otherwise=first) is second
    assert storage_error(answer("Other", 400), otherwise=first) is first


def test_a_meaning_may_be_made_from_the_answer() -> None:
    mapped = storage_error(
        answer("Teapot", 418), otherwise=lambda error: OSError(error.response["Error"]["Code"])
    )
    assert isinstance(mapped, OSError) and str(mapped) == "Teapot"


def test_s3_errors_raises_the_meaning_from_the_answer() -> None:
    error = answer("NoSuchKey", 404)
    with (
        pytest.raises(FileNotFoundError, match="b/k") as raised,
        s3_errors(({"NoSuchKey"}, FileNotFoundError("b/k"))),
    ):
        raise error
    assert raised.value.__cause__ is error


def test_s3_errors_reraises_an_unchanged_answer_as_it_is() -> None:
    error = answer("InvalidArgument", 400)
    with pytest.raises(ClientError) as raised, s3_errors():
        raise error
    assert raised.value is error and raised.value.__cause__ is None


def test_s3_errors_lets_an_answer_that_is_no_failure_end_the_block() -> None:
    reached = []
    with s3_errors(({404}, None)):
        raise answer("NoSuchBucket", 404)
    reached.append(True)
    assert reached == [True]


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="http://store"),
        ConnectTimeoutError(endpoint_url="http://store"),
        ReadTimeoutError(endpoint_url="http://store"),
        ResponseStreamingError(error="connection reset"),
        NoCredentialsError(),
    ],
    ids=lambda error: type(error).__name__,
)
def test_no_answer_at_all_is_an_outage(error: Exception) -> None:
    with (
        pytest.raises(StorageUnavailable, match="unreachable") as raised,
        s3_errors(({"X"}, None), otherwise=None),
    ):
        raise error
    assert raised.value.__cause__ is error


def test_s3_errors_leaves_other_errors_alone() -> None:
    with pytest.raises(KeyError), s3_errors(otherwise=None):
        raise KeyError("not botocore's")


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (404, b"<Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>", "NoSuchBucket"),
        (403, b"", "403"),  # no body: the bare status, as botocore reports a HEAD's
        (503, b"<html>Service Unavailable</html>", "503"),
    ],
)
def test_client_error_from_a_raw_answer(status: int, body: bytes, code: str) -> None:
    error = client_error(status, body, "ListObjectsV2")
    assert error.response["Error"]["Code"] == code
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert error.operation_name == "ListObjectsV2"


# -- each S3Storage call's meanings ---------------------------------------------------------------


@pytest.fixture
def storage() -> S3Storage:
    return S3Storage(S3Settings(endpoint="http://127.0.0.1:9", access_key="a", secret_key="b"))


CALLS: dict[str, Any] = {
    "list": lambda storage: list(storage.list("b", "p/")),
    "folders": lambda storage: storage.folders("b", "p/"),
    "read": lambda storage: storage.read("b", "k"),
    "bucket_exists": lambda storage: storage.bucket_exists("b"),
    "create_bucket": lambda storage: storage.create_bucket("b"),
    "delete_bucket": lambda storage: storage.delete_bucket("b"),
    "delete": lambda storage: storage.delete("b", ["k"]),
    "write": lambda storage: storage.write("b", "k", b"x"),
    "stat": lambda storage: storage.stat("b", "k"),
    "open": lambda storage: storage.open("b", "k"),
    "local_file": lambda storage: storage.local_file("b", "k"),
}


def returned(value: Any) -> tuple[str, Any]:
    return ("returned", value)


@pytest.mark.parametrize(
    ("call", "code", "status", "expected"),
    [
        ("list", "NoSuchBucket", 404, returned([])),
        ("list", "NoSuchKey", 404, UNCHANGED),
        ("list", "AccessDenied", 403, DENIED),
        ("list", "SlowDown", 503, DOWN),
        ("folders", "NoSuchBucket", 404, returned([])),
        ("folders", "InvalidArgument", 400, UNCHANGED),
        ("read", "NoSuchKey", 404, (FileNotFoundError, "b/k")),
        ("read", "404", 404, (FileNotFoundError, "b/k")),
        ("read", "NoSuchBucket", 404, (FileNotFoundError, "b/k")),
        ("read", "InvalidAccessKeyId", 403, DENIED),
        ("read", "InternalError", 500, DOWN),
        ("read", "InvalidRange", 416, UNCHANGED),
        ("bucket_exists", "404", 404, returned(False)),
        ("bucket_exists", "NoSuchBucket", 404, returned(False)),
        ("bucket_exists", "404", 403, returned(False)),  # the code goes before the status
        ("bucket_exists", "403", 403, returned(True)),
        ("bucket_exists", "AccessDenied", 403, returned(True)),
        ("bucket_exists", "PermanentRedirect", 301, returned(True)),
        ("bucket_exists", "Odd", 301, returned(True)),
        ("bucket_exists", "InvalidAccessKeyId", 400, DENIED),
        ("bucket_exists", "503", 503, DOWN),
        ("bucket_exists", "NoSuchKey", 404, UNCHANGED),
        ("create_bucket", "BucketAlreadyOwnedByYou", 409, (FileExistsError, "bucket b already exists")),
        ("create_bucket", "BucketAlreadyExists", 409, (FileExistsError, "bucket b already exists")),
        ("create_bucket", "AccessDenied", 403, (PermissionError, "cannot create bucket b")),
        ("create_bucket", "InvalidBucketName", 400, (OSError, "cannot create bucket b: InvalidBucketName")),
        ("create_bucket", "SlowDown", 503, (OSError, "cannot create bucket b: SlowDown")),  # not an outage
        ("delete_bucket", "BucketNotEmpty", 409, returned(False)),
        ("delete_bucket", "AccessDenied", 403, returned(False)),
        ("delete_bucket", "InternalError", 500, returned(False)),
        ("delete", "AccessDenied", 403, DENIED),
        ("delete", "SlowDown", 503, DOWN),
        ("delete", "NoSuchBucket", 404, UNCHANGED),
        ("write", "NoSuchBucket", 404, (PermissionError, "cannot write to bucket b")),
        ("write", "AccessDenied", 403, (PermissionError, "cannot write to bucket b")),
        ("write", "SignatureDoesNotMatch", 403, (PermissionError, "cannot write to bucket b")),
        ("write", "SlowDown", 503, DOWN),
        ("write", "EntityTooLarge", 400, UNCHANGED),
        ("stat", "NoSuchKey", 404, returned(None)),
        ("stat", "404", 404, returned(None)),
        ("stat", "403", 403, DENIED),
        ("stat", "500", 500, DOWN),
        ("open", "404", 404, (FileNotFoundError, "b/k")),
        ("open", "Forbidden", 403, DENIED),
        ("open", "503", 503, DOWN),
        ("local_file", "404", 404, (FileNotFoundError, "b/k")),
        ("local_file", "AccessDenied", 403, DENIED),
        ("local_file", "SlowDown", 503, DOWN),
        ("local_file", "InvalidObjectState", 403, UNCHANGED),
    ],
)
def test_each_call_maps_an_answer(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, call: str, code: str, status: int, expected: Any
) -> None:
    error = answer(code, status)

    def refuse(*_: Any, **__: Any) -> None:
        raise error

    monkeypatch.setattr(storage._client, "_make_api_call", refuse)
    storage._own_signer = None  # botocore's way, as for a store our signer does not cover (below)
    if expected is UNCHANGED:
        with pytest.raises(ClientError) as raised:
            CALLS[call](storage)
        assert raised.value is error
    elif expected[0] == "returned":
        assert CALLS[call](storage) == expected[1]
    else:
        kind, message = expected
        with pytest.raises(kind) as raised:
            CALLS[call](storage)
        assert type(raised.value) is kind and str(raised.value) == message
        assert raised.value.__cause__ is error


@pytest.mark.parametrize("call", sorted(CALLS))
def test_each_call_makes_no_answer_an_outage(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    def unreachable(*_: Any, **__: Any) -> None:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    monkeypatch.setattr(storage._client, "_make_api_call", unreachable)
    storage._own_signer = None
    with pytest.raises(StorageUnavailable, match="unreachable"):
        CALLS[call](storage)


def test_a_failed_download_leaves_no_file(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def refuse(*_: Any, **__: Any) -> None:
        raise answer("404", 404)

    monkeypatch.setattr(storage._client, "_make_api_call", refuse)
    with pytest.raises(FileNotFoundError):
        storage.local_file("b", "k")
    assert list(tmp_path.iterdir()) == []


# -- the hand-written listing (`missing`) ---------------------------------------------------------


class Pool:
    """Answers `request` with each of `answers` in turn, the last one from then on."""

    def __init__(self, *answers: Any) -> None:
        self.answers, self.requests = list(answers), 0

    def request(self, *_: Any, **__: Any) -> Any:
        self.requests += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Response:
    def __init__(self, status: int, data: bytes = b"") -> None:
        self.status, self.data = status, data


PAGE = Response(200, b"<ListBucketResult><Key>t%2Fa</Key><IsTruncated>false</IsTruncated></ListBucketResult>")


def code(name: str) -> bytes:
    return f"<Error><Code>{name}</Code></Error>".encode()


@pytest.mark.parametrize(
    ("answers", "expected", "requests"),
    [
        ([PAGE], ["t/b"], 1),
        ([Response(404, code("NoSuchBucket"))], ["t/a", "t/b"], 1),  # no bucket: every key missing
        ([Response(403)], DENIED, 1),  # bodiless
        ([Response(403, code("AllAccessDisabled"))], DENIED, 1),  # any 403, whatever its code
        ([Response(400, code("SignatureDoesNotMatch"))], DENIED, 1),
        ([Response(400, code("InvalidArgument"))], DOWN, 1),  # no page, not retried
        ([Response(301, code("PermanentRedirect"))], DOWN, 1),
        ([Response(503, code("SlowDown")), PAGE], ["t/b"], 2),  # retried
        ([Response(500)], DOWN, 2),  # retried, then an outage
        ([Response(503, code("AccessDenied"))], DENIED, 1),  # a refusal is not retried
        ([urllib3.exceptions.ProtocolError("reset"), PAGE], ["t/b"], 2),
        ([urllib3.exceptions.ConnectTimeoutError("slow")], DOWN, 2),
    ],
)
def test_the_listing_maps_its_answers(
    storage: S3Storage, answers: list[Any], expected: Any, requests: int
) -> None:
    storage._http = Pool(*answers)
    if isinstance(expected, list):
        assert storage.missing("b", "t/", ["t/a", "t/b"]) == expected
    else:
        kind, message = expected
        with pytest.raises(kind, match=message):
            storage.missing("b", "t/", ["t/a", "t/b"])
    assert storage._http.requests == requests


# -- the server's own PUT and single DELETE (`_object_request`) ------------------------------------

OK = Response(200)
NOT_A_PAGE = (StorageUnavailable, "object storage answered a listing that is not one")
LISTED = Response(
    200,
    b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>b</Name><Prefix>p%2F</Prefix><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
    b"<Contents><Key>p%2Fa+b%2Bc</Key><LastModified>2025-12-06T05:46:40.123Z</LastModified>"
    b"<ETag>&quot;e&quot;</ETag><Size>3</Size></Contents>"
    b"<CommonPrefixes><Prefix>p%2Fsub%2F</Prefix></CommonPrefixes></ListBucketResult>",
)
WRITE_REFUSED = (PermissionError, "cannot write to bucket b")


@pytest.mark.parametrize(
    ("call", "answers", "expected", "requests"),
    [
        ("write", [OK], returned(None), 1),
        ("write", [Response(404, code("NoSuchBucket"))], WRITE_REFUSED, 1),
        ("write", [Response(403, code("AccessDenied"))], WRITE_REFUSED, 1),
        ("write", [Response(403, code("SignatureDoesNotMatch"))], WRITE_REFUSED, 1),
        ("write", [Response(503, code("AccessDenied"))], WRITE_REFUSED, 1),  # a refusal is not retried
        ("write", [Response(503, code("SlowDown")), OK], returned(None), 2),  # retried
        ("write", [Response(500)], DOWN, 2),  # retried, then an outage
        ("write", [Response(400, code("EntityTooLarge"))], ("unchanged", "EntityTooLarge"), 1),
        ("write", [urllib3.exceptions.ProtocolError("reset"), OK], returned(None), 2),
        ("write", [urllib3.exceptions.ConnectTimeoutError("slow")], DOWN, 2),
        ("delete", [Response(204)], returned(None), 1),
        ("delete", [Response(403, code("AccessDenied"))], DENIED, 1),
        ("delete", [Response(503, code("SlowDown"))], DOWN, 2),
        ("delete", [Response(404, code("NoSuchBucket"))], ("unchanged", "NoSuchBucket"), 1),
        ("delete", [urllib3.exceptions.ReadTimeoutError(None, "/", "slow")], DOWN, 2),
        ("read", [Response(200, b"a commit")], returned(b"a commit"), 1),
        ("read", [Response(404, code("NoSuchKey"))], (FileNotFoundError, "b/k"), 1),
        ("read", [Response(404)], (FileNotFoundError, "b/k"), 1),  # bodiless
        ("read", [Response(404, code("NoSuchBucket"))], (FileNotFoundError, "b/k"), 1),
        ("read", [Response(403, code("InvalidAccessKeyId"))], DENIED, 1),
        ("read", [Response(500, code("InternalError")), Response(200, b"x")], returned(b"x"), 2),
        ("read", [Response(500, code("InternalError"))], DOWN, 2),
        ("read", [Response(416, code("InvalidRange"))], ("unchanged", "InvalidRange"), 1),
        ("read", [urllib3.exceptions.ProtocolError("reset"), Response(200, b"x")], returned(b"x"), 2),
        ("list", [LISTED], returned([ObjectInfo("p/a b+c", 3, 1_765_000_000_123)]), 1),
        ("list", [Response(404, code("NoSuchBucket"))], returned([]), 1),
        ("list", [Response(403, code("AccessDenied"))], DENIED, 1),
        ("list", [Response(503, code("SlowDown"))], DOWN, 2),
        ("list", [Response(200, b"<html>a proxy's page</html>")], NOT_A_PAGE, 1),  # not "nothing listed"
        ("list", [Response(200, b"<ListBucketResult><Contents><Key>x</Key></Contents>")], NOT_A_PAGE, 1),
        ("folders", [LISTED], returned(["p/sub/"]), 1),
        ("folders", [Response(404, code("NoSuchBucket"))], returned([]), 1),
        ("folders", [Response(400, code("InvalidArgument"))], DOWN, 1),  # no page: the store failing
    ],
)
def test_own_requests_map_their_answers_as_botocores(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, call: str, answers: list[Any], expected: Any,
    requests: int,
) -> None:  # fmt: skip
    """A read, a listing, a write and a one-key delete go by a URL our signer signs, never through
    botocore, and mean what botocore's answers mean to the same calls (the table above); a listing
    that is no page is the store failing, as for `missing`."""

    def not_botocore(*_: Any, **__: Any) -> None:
        raise AssertionError("botocore was called")

    monkeypatch.setattr(storage._client, "_make_api_call", not_botocore)
    storage._http = Pool(*answers)
    if expected[0] == "returned":
        assert CALLS[call](storage) == expected[1]
    elif expected[0] == "unchanged":
        with pytest.raises(ClientError) as unchanged:
            CALLS[call](storage)
        assert unchanged.value.response["Error"]["Code"] == expected[1]
    else:
        kind, message = expected
        with pytest.raises(kind) as raised:
            CALLS[call](storage)
        assert type(raised.value) is kind and str(raised.value) == message
    assert storage._http.requests == requests


def test_a_delete_of_many_keys_is_one_botocore_delete_objects(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[str] = []
    monkeypatch.setattr(storage._client, "_make_api_call", lambda operation, _: called.append(operation))
    storage._http = Pool(AssertionError("a DELETE per key"))
    storage.delete("b", ["k1", "k2", "k3"])
    assert called == ["DeleteObjects"]


@pytest.mark.parametrize("key", ["t/../other/k", "t/./k", ".."])
def test_a_key_with_dot_segments_goes_by_botocore_as_it_is(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """urllib3 resolves `..` and `.` in a URL's path: sent by our signed URL, the request would
    name another key (and its signature fail). botocore sends the key as it is."""
    sent: list[tuple[str, str]] = []

    def botocore(operation: str, params: dict[str, Any]) -> None:
        sent.append((operation, params.get("Key") or params["Delete"]["Objects"][0]["Key"]))

    monkeypatch.setattr(storage._client, "_make_api_call", botocore)
    storage._http = Pool(AssertionError("sent by our signed URL"))
    storage.write("b", key, b"x")
    storage.delete("b", [key])
    with pytest.raises(TypeError):  # the stub answers no body: botocore was asked, not urllib3
        storage.read("b", key)
    assert sent == [("PutObject", key), ("DeleteObjects", key), ("GetObject", key)]


@pytest.mark.parametrize("bucket", ["..", "."])
def test_a_dot_segment_bucket_goes_by_botocore(
    storage: S3Storage, monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    """A bucket named `..` would resolve out of the URL's path as a key's segment would: its reads,
    writes and listings go by botocore too."""
    sent: list[str] = []

    def botocore(operation: str, params: dict[str, Any]) -> Any:
        sent.append(operation)
        raise answer("NoSuchBucket", 404)

    monkeypatch.setattr(storage._client, "_make_api_call", botocore)
    storage._http = Pool(AssertionError("sent by our signed URL"))
    assert list(storage.list(bucket, "t/")) == [] and storage.folders(bucket, "t/") == []
    with pytest.raises(FileNotFoundError):
        storage.read(bucket, "t/k")
    assert sent == ["ListObjectsV2", "ListObjectsV2", "GetObject"]


def test_own_requests_are_signed_for_the_endpoint_the_server_reaches() -> None:
    """Recipients' URLs name the public endpoint; the server's own PUT and DELETE the one it reaches
    (the same signer when they are one)."""
    both = S3Storage(S3Settings(endpoint="http://127.0.0.1:9000", public_endpoint="https://s3.example.com",
                                access_key="a", secret_key="b"))  # fmt: skip
    assert both._presigner is not None and both._own_signer is not None
    assert both._presigner.netloc == "s3.example.com" and both._own_signer.netloc == "127.0.0.1:9000"
    one = S3Storage(S3Settings(endpoint="http://127.0.0.1:9000", access_key="a", secret_key="b"))
    assert one._own_signer is one._presigner


def test_a_listing_page_not_url_encoded_is_read_as_it_is() -> None:
    """A store that ignores `encoding-type=url` sends keys as XML text: entities decoded, `+` and
    `%` kept; the next page's token only where the page says it is truncated."""
    page = listing_page(
        b"<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>a&amp;b=</NextContinuationToken>"
        b"<Contents><Key>t/a+b%2F&amp;&lt;c&gt;.json</Key><LastModified>2025-12-06T05:46:40Z</LastModified>"
        b"</Contents><CommonPrefixes><Prefix>t/x+y/</Prefix></CommonPrefixes></ListBucketResult>"
    )
    assert page.objects == [ObjectInfo("t/a+b%2F&<c>.json", 0, 1_765_000_000_000)]
    assert page.prefixes == ["t/x+y/"] and page.next_token == "a&b="
    last = listing_page(
        b"<ListBucketResult><NextContinuationToken>x</NextContinuationToken></ListBucketResult>"
    )
    assert last.objects == [] and last.next_token is None
