"""Unit tests of `sharing_server.delta_sharing.requests`: request parsing, without HTTP.

Covered: `QueryRequest.parse` (accepted bodies, each refusal with its exact
message, the `validate()` rules) and `QueryRequest.checksum`; `ChangesRequest.parse`
and its checksum; the query-string parsers `parse_max_results`, `parse_timestamp`,
`parse_bool`. The same rules over real HTTP are in the test_routes_*.py beside this file;
`Capabilities` is in test_capabilities.py, `line_bytes` and `ndjson_chunks` in
tests/sharing_server/http/test_ndjson.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from share_store.errors import InvalidParameter, MalformedRequest, ShareStoreError
from sharing_server.delta_sharing.requests import (
    MAX_LIST_RESULTS,
    ChangesRequest,
    QueryRequest,
    parse_bool,
    parse_max_results,
    parse_timestamp,
)

# -- QueryRequest.parse -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{}", QueryRequest()),
        (b"  {}\n", QueryRequest()),
        (b'{"predicateHints":null,"version":null,"timestamp":null,"pageToken":null}', QueryRequest()),
        (b'{"predicateHints":[]}', QueryRequest()),
        (
            b'{"predicateHints":["a = 1","b > 2"],"jsonPredicateHints":"{}","limitHint":5}',
            QueryRequest(predicate_hints=("a = 1", "b > 2"), json_predicate_hints="{}", limit_hint=5),
        ),
        (b'{"version":3}', QueryRequest(version=3)),
        # The reference (scalapb) reads numbers sent as JSON strings.
        (b'{"version":"3"}', QueryRequest(version=3)),
        (b'{"limitHint":"0"}', QueryRequest(limit_hint=0)),
        (b'{"version":0}', QueryRequest(version=0)),
        (b'{"version":9223372036854775807}', QueryRequest(version=2**63 - 1)),
        (b'{"timestamp":"2024-01-01T00:00:00Z"}', QueryRequest(timestamp="2024-01-01T00:00:00Z")),
        (
            b'{"startingVersion":"1","endingVersion":4,"maxFiles":"10","pageToken":"tok"}',
            QueryRequest(starting_version=1, ending_version=4, max_files=10, page_token="tok"),
        ),
        (b'{"startingVersion":2,"endingVersion":2}', QueryRequest(starting_version=2, ending_version=2)),
        (b'{"endingVersion":5}', QueryRequest(ending_version=5)),
        (b'{"maxFiles":2147483647}', QueryRequest(max_files=2**31 - 1)),
        (b'{"includeRefreshToken":true}', QueryRequest(include_refresh_token=True)),
        # Booleans sent as strings, in any case.
        (b'{"includeRefreshToken":"TRUE"}', QueryRequest(include_refresh_token=True)),
        (b'{"includeRefreshToken":"False"}', QueryRequest()),
        (b'{"includeHistoricalProtocol":"true"}', QueryRequest(include_historical_protocol=True)),
        (b'{"refreshToken":"r"}', QueryRequest(refresh_token="r")),
        (b'{"somethingElse":[1,2]}', QueryRequest()),
    ],
)
def test_query_request_parses(body: bytes, expected: QueryRequest) -> None:
    assert QueryRequest.parse(body) == expected


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (b"", MalformedRequest, "No content to map due to end-of-input"),
        (b" \n ", MalformedRequest, "No content to map due to end-of-input"),
        (
            b"{",
            MalformedRequest,
            "Invalid JSON in request body: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        (
            b'{"version":}',
            MalformedRequest,
            "Invalid JSON in request body: Expecting value: line 1 column 12 (char 11)",
        ),
        (
            b"\xff",
            MalformedRequest,
            "Invalid JSON in request body: 'utf-8' codec can't decode byte 0xff in position 0: "
            "invalid start byte",
        ),
        (b"[]", MalformedRequest, "Expected a JSON object as request body"),
        (b'"{}"', MalformedRequest, "Expected a JSON object as request body"),
        (b"3", MalformedRequest, "Expected a JSON object as request body"),
        (
            b'{"predicateHints":"a = 1"}',
            MalformedRequest,
            "Expected an array for repeated field predicateHints of QueryTableRequest",
        ),
        (
            b'{"predicateHints":["a = 1",2]}',
            MalformedRequest,
            "Expected an array for repeated field predicateHints of QueryTableRequest",
        ),
        (b'{"version":"x3"}', MalformedRequest, "Not a numeric value: x3"),
        (b'{"version":1.5}', MalformedRequest, "Not a numeric value: 1.5"),
        (b'{"version":"1.0"}', MalformedRequest, "Not a numeric value: 1.0"),
        (b'{"version":true}', MalformedRequest, "Not a numeric value: True"),
        (b'{"limitHint":[1]}', MalformedRequest, "Not a numeric value: [1]"),
        (b'{"maxFiles":2147483648}', MalformedRequest, "Not an int32 value: 2147483648"),
        (b'{"maxFiles":"3000000000"}', MalformedRequest, "Not an int32 value: 3000000000"),
        (b'{"version":9223372036854775808}', MalformedRequest, "Not an int64 value: 9223372036854775808"),
        (
            b'{"startingVersion":"-9223372036854775809"}',
            MalformedRequest,
            "Not an int64 value: -9223372036854775809",
        ),
        (b'{"timestamp":5}', MalformedRequest, "Expected a string for timestamp"),
        (b'{"pageToken":{}}', MalformedRequest, "Expected a string for pageToken"),
        (
            b'{"jsonPredicateHints":{"op":"and"}}',
            MalformedRequest,
            "Expected a string for jsonPredicateHints",
        ),
        (
            b'{"includeRefreshToken":"yes"}',
            MalformedRequest,
            "Expected a boolean for includeRefreshToken: yes",
        ),
        (b'{"includeRefreshToken":1}', MalformedRequest, "Expected a boolean for includeRefreshToken: 1"),
        (
            b'{"includeHistoricalProtocol":"on"}',
            MalformedRequest,
            "Expected a boolean for includeHistoricalProtocol: on",
        ),
        # validate(): the reference server's parameter rules.
        (
            b'{"version":1,"timestamp":"2020-01-01T00:00:00Z"}',
            InvalidParameter,
            "Please only provide one of: version,timestamp,startingVersion",
        ),
        (
            b'{"version":1,"startingVersion":1}',
            InvalidParameter,
            "Please only provide one of: version,timestamp,startingVersion",
        ),
        (
            b'{"timestamp":"2020-01-01T00:00:00Z","startingVersion":0}',
            InvalidParameter,
            "Please only provide one of: version,timestamp,startingVersion",
        ),
        (b'{"version":-1}', InvalidParameter, "table version cannot be negative."),
        (b'{"startingVersion":"-1"}', InvalidParameter, "startingVersion cannot be negative."),
        (
            b'{"startingVersion":3,"endingVersion":2}',
            InvalidParameter,
            "startingVersion(3) must be smaller than or equal to endingVersion(2).",
        ),
        (b'{"maxFiles":0}', InvalidParameter, "maxFiles must be positive."),
        (b'{"maxFiles":-5}', InvalidParameter, "maxFiles must be positive."),
        (b'{"limitHint":-1}', InvalidParameter, "limitHint cannot be negative."),
        (
            b'{"includeRefreshToken":true,"version":1}',
            InvalidParameter,
            "includeRefreshToken cannot be used when querying a specific version.",
        ),
        (
            b'{"includeRefreshToken":true,"timestamp":"2020-01-01T00:00:00Z"}',
            InvalidParameter,
            "includeRefreshToken cannot be used when querying a specific version.",
        ),
        (
            b'{"includeRefreshToken":true,"startingVersion":0}',
            InvalidParameter,
            "includeRefreshToken cannot be used when querying a specific version.",
        ),
        (
            b'{"includeRefreshToken":true,"pageToken":"p"}',
            InvalidParameter,
            "includeRefreshToken must be used in the first page request.",
        ),
        (
            b'{"refreshToken":"r","version":0}',
            InvalidParameter,
            "refreshToken cannot be used when querying a specific version.",
        ),
        (
            b'{"refreshToken":"r","pageToken":"p"}',
            InvalidParameter,
            "refreshToken must be used in the first page request.",
        ),
    ],
)
def test_query_request_refusals(body: bytes, error: type[ShareStoreError], message: str) -> None:
    with pytest.raises(ShareStoreError) as raised:
        QueryRequest.parse(body)
    assert type(raised.value) is error
    assert raised.value.message == message


@pytest.mark.parametrize(
    "body",
    [
        b'{"predicateHints":["\\ud800"]}',
        b'{"jsonPredicateHints":"\\udfff"}',
        b'{"timestamp":"\\ud800"}',
        b'{"pageToken":"x\\ud800y"}',
        b'{"version":"\\ud800"}',
        b'{"\\ud800":1}',
        b"[" * 200_000,
        b'{"a":' * 100_000,
    ],
    ids=["hint", "json-hint", "timestamp", "page-token", "number", "key", "deep-array", "deep-object"],
)
def test_bodies_that_cannot_be_used_are_malformed(body: bytes) -> None:
    # Lone surrogates cannot be encoded (page-token checksums, hint sizes, messages echoing
    # them): refused up front; nesting past the parser's recursion is refused too.
    with pytest.raises(MalformedRequest, match="Invalid JSON in request body"):
        QueryRequest.parse(body)


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    request = QueryRequest.parse(b'{"predicateHints":["v = \'\\ud83d\\ude00\'"]}')
    assert request.predicate_hints == ("v = '\U0001f600'",)
    assert len(request.checksum()) == 32


# -- QueryRequest.checksum --------------------------------------------------------------------

BASE_QUERY = QueryRequest(predicate_hints=("a = 1",), starting_version=1, ending_version=5)


def test_query_checksum_is_fixed() -> None:
    # Page tokens carry it: the same request must give the same value from one release to the next.
    assert QueryRequest().checksum() == "1684204c4214e11c24941ddd8cf057a4"


def test_query_checksum_is_the_same_for_the_same_shape() -> None:
    assert (
        QueryRequest.parse(b'{"version":"3"}').checksum() == QueryRequest.parse(b'{"version":3}').checksum()
    )
    assert BASE_QUERY.checksum() == replace(BASE_QUERY).checksum()


@pytest.mark.parametrize(
    "changes",
    [
        {"version": 1, "starting_version": None, "ending_version": None},
        {"timestamp": "2024-01-01T00:00:00Z", "starting_version": None, "ending_version": None},
        {"starting_version": 2},
        {"ending_version": 6},
        {"predicate_hints": ("a = 2",)},
        {"predicate_hints": ()},
        {"json_predicate_hints": '{"op":"isNull"}'},
        {"limit_hint": 10},
    ],
)
def test_query_checksum_changes_with_a_shaping_field(changes: dict[str, Any]) -> None:
    assert replace(BASE_QUERY, **changes).checksum() != BASE_QUERY.checksum()


@pytest.mark.parametrize(
    "changes",
    [
        {"page_token": "next"},
        {"max_files": 10},
        {"include_refresh_token": True},
        {"refresh_token": "refresh"},
    ],
)
def test_query_checksum_ignores_paging_and_refresh_fields(changes: dict[str, Any]) -> None:
    assert replace(BASE_QUERY, **changes).checksum() == BASE_QUERY.checksum()


# -- ChangesRequest ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"startingVersion": "0"}, ChangesRequest(starting_version=0)),
        (
            {"startingTimestamp": "2024-01-01T00:00:00Z", "endingTimestamp": "2024-02-01T00:00:00Z"},
            ChangesRequest(
                starting_timestamp="2024-01-01T00:00:00Z", ending_timestamp="2024-02-01T00:00:00Z"
            ),
        ),
        (
            {
                "startingVersion": "1",
                "endingVersion": "3",
                "includeHistoricalMetadata": "True",
                "includeHistoricalProtocol": "false",
                "maxFiles": "10",
                "pageToken": "tok",
            },
            ChangesRequest(
                starting_version=1,
                ending_version=3,
                include_historical_metadata=True,
                max_files=10,
                page_token="tok",
            ),
        ),
        (
            {"startingVersion": "2", "includeHistoricalProtocol": "TRUE"},
            ChangesRequest(starting_version=2, include_historical_protocol=True),
        ),
        # Order is checked later, against the table's versions.
        (
            {"startingVersion": "5", "endingVersion": "1"},
            ChangesRequest(starting_version=5, ending_version=1),
        ),
    ],
)
def test_changes_request_parses(params: dict[str, str], expected: ChangesRequest) -> None:
    assert ChangesRequest.parse(params) == expected


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "No startingVersion or startingTimestamp provided for CDF read."),
        ({"endingVersion": "3"}, "No startingVersion or startingTimestamp provided for CDF read."),
        (
            {"startingVersion": "0", "startingTimestamp": "2024-01-01T00:00:00Z"},
            "Multiple starting arguments provided for CDF read. Please provide one of either "
            "startingTimestamp or startingVersion.",
        ),
        (
            {"startingVersion": "0", "endingVersion": "1", "endingTimestamp": "2024-01-01T00:00:00Z"},
            "Multiple ending arguments provided for CDF read. Please provide one of either "
            "endingTimestamp or endingVersion.",
        ),
        (
            {"startingVersion": "0", "maxFiles": "ten"},
            "expected a number but the string didn't have the appropriate format",
        ),
        ({"startingVersion": "0", "maxFiles": "0"}, "maxFiles must be positive."),
        ({"startingVersion": "0", "maxFiles": "-2"}, "maxFiles must be positive."),
        ({"startingVersion": "one"}, "startingVersion is not a valid number."),
        ({"startingVersion": "0", "endingVersion": "2.5"}, "endingVersion is not a valid number."),
        ({"startingVersion": "-1"}, "startingVersion cannot be negative."),
        ({"startingVersion": "0", "endingVersion": "-1"}, "endingVersion cannot be negative."),
        (
            {"startingVersion": "0", "includeHistoricalMetadata": "yes"},
            "includeHistoricalMetadata must be true or false, not 'yes'",
        ),
        (
            {"startingVersion": "0", "includeHistoricalProtocol": "1"},
            "includeHistoricalProtocol must be true or false, not '1'",
        ),
    ],
)
def test_changes_request_refusals(params: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        ChangesRequest.parse(params)
    assert raised.value.message == message


BASE_CHANGES = ChangesRequest(starting_version=1, ending_version=5)


def test_changes_checksum_is_fixed() -> None:
    assert ChangesRequest().checksum() == "a535fbc374eabe37fb364de7a9f55a94"
    assert ChangesRequest.parse({"startingVersion": "1", "endingVersion": "5"}).checksum() == (
        BASE_CHANGES.checksum()
    )


@pytest.mark.parametrize(
    ("changes", "same"),
    [
        ({"starting_version": 2}, False),
        ({"starting_version": None, "starting_timestamp": "2024-01-01T00:00:00Z"}, False),
        ({"ending_version": 6}, False),
        ({"ending_version": None, "ending_timestamp": "2024-01-01T00:00:00Z"}, False),
        ({"include_historical_metadata": True}, False),
        ({"include_historical_protocol": True}, False),
        ({"max_files": 3}, True),
        ({"page_token": "next"}, True),
    ],
)
def test_changes_checksum(changes: dict[str, Any], same: bool) -> None:
    assert (replace(BASE_CHANGES, **changes).checksum() == BASE_CHANGES.checksum()) is same


# -- query-string values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, MAX_LIST_RESULTS), ("0", 0), ("1", 1), ("500", 500), (" 7 ", 7)],
)
def test_parse_max_results(raw: str | None, expected: int) -> None:
    assert parse_max_results(raw) == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("501", "Acceptable values of 'maxResults' are 0 to 500, inclusive. (Default: 500)"),
        ("-1", "Acceptable values of 'maxResults' are 0 to 500, inclusive. (Default: 500)"),
        ("ten", "expected a number but the string didn't have the appropriate format"),
        ("", "expected a number but the string didn't have the appropriate format"),
        ("1.5", "expected a number but the string didn't have the appropriate format"),
    ],
)
def test_parse_max_results_refusals(raw: str, message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        parse_max_results(raw)
    assert raised.value.message == message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-01-02T03:04:05Z", 1_704_164_645_000),
        ("2024-01-02T03:04:05.123Z", 1_704_164_645_123),
        ("2024-01-02T03:04:05+02:00", 1_704_157_445_000),
        ("2024-01-02T03:04:05-05:30", 1_704_184_445_000),
        ("2024-01-02T03:04:05+00:00", 1_704_164_645_000),
        ("2024-01-02T03:04:05", 1_704_164_645_000),  # no zone: UTC
        ("2024-01-02 03:04:05Z", 1_704_164_645_000),
        ("2024-01-02", 1_704_153_600_000),
        (" 2024-01-02T03:04:05Z\n", 1_704_164_645_000),
        ("1970-01-01T00:00:00Z", 0),
        # Float seconds times 1000 would truncate this to ...119, a millisecond early.
        ("2004-09-18T13:12:28.120Z", 1_095_513_148_120),
    ],
)
def test_parse_timestamp(raw: str, expected: int) -> None:
    assert parse_timestamp(raw) == expected


@pytest.mark.parametrize(
    ("raw", "name", "message"),
    [
        ("not-a-time", "startingTimestamp", "Invalid startingTimestamp: not-a-time"),
        ("2024-13-01T00:00:00Z", "startingTimestamp", "Invalid startingTimestamp: 2024-13-01T00:00:00Z"),
        ("", "endingTimestamp", "Invalid endingTimestamp: "),
        ("1704164645000", "endingTimestamp", "Invalid endingTimestamp: 1704164645000"),
    ],
)
def test_parse_timestamp_refusals(raw: str, name: str, message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        parse_timestamp(raw, name)
    assert raised.value.message == message


def test_parse_timestamp_names_starting_timestamp_by_default() -> None:
    with pytest.raises(InvalidParameter) as raised:
        parse_timestamp("yesterday")
    assert raised.value.message == "Invalid startingTimestamp: yesterday"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, False), ("true", True), ("True", True), (" TRUE ", True), ("false", False), ("False", False)],
)
def test_parse_bool(raw: str | None, expected: bool) -> None:
    assert parse_bool(raw, "flag") is expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("1", "flag must be true or false, not '1'"),
        ("", "flag must be true or false, not ''"),
        ("yes", "flag must be true or false, not 'yes'"),
    ],
)
def test_parse_bool_refusals(raw: str, message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        parse_bool(raw, "flag")
    assert raised.value.message == message
