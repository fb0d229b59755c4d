"""Protocol request parsing, free of HTTP plumbing: query parameters and request bodies.

Parsing follows the reference server's rules and messages (protocol notes
§1, §2.3) so that clients' error handling sees what it expects.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from share_store.errors import InvalidParameter, MalformedRequest
from sharing_server.http.json_text import NotAJsonObject, json_object
from sharing_server.http.ndjson import dumps

MAX_LIST_RESULTS = 500
MAX_PAGE_FILES = 10_000
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: An async query's idempotency key is the client's choice of string; past this it is refused.
MAX_IDEMPOTENCY_KEY_CHARS = 256
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- query parameters ------------------------------------------------------------


def parse_max_results(raw: str | None) -> int:
    if raw is None:
        return MAX_LIST_RESULTS
    try:
        value = int(raw)
    except ValueError:
        raise InvalidParameter(
            "expected a number but the string didn't have the appropriate format"
        ) from None
    if not 0 <= value <= MAX_LIST_RESULTS:
        raise InvalidParameter(
            f"Acceptable values of 'maxResults' are 0 to {MAX_LIST_RESULTS}, inclusive. "
            f"(Default: {MAX_LIST_RESULTS})"
        )
    return value


def parse_timestamp(raw: str, name: str = "startingTimestamp") -> int:
    """ISO-8601 (offset required unless it ends in a date-time without zone: UTC) → epoch ms."""
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidParameter(f"Invalid {name}: {raw}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # Integer arithmetic: float seconds times 1000 can land a millisecond early,
    # and a timestamp equal to a commit's must find that commit.
    return (moment - EPOCH) // timedelta(milliseconds=1)


def body_object(raw: bytes) -> dict[str, Any]:
    """A `/query` or query-info body: one JSON object (`json_text.json_object`'s strict read), in
    the reference's words where it has them."""
    if not raw.strip():
        raise MalformedRequest("No content to map due to end-of-input")
    try:
        return json_object(raw)
    except NotAJsonObject as error:
        if error.problem == "not an object":
            raise MalformedRequest("Expected a JSON object as request body") from None
        raise MalformedRequest(f"Invalid JSON in request body: {error.detail}") from None


def _idempotency_key(body: dict[str, Any]) -> str | None:
    """The async query's key, in the protocol document's spelling or the JVM client's."""
    keys = [body[name] for name in ("idempotencyKey", "idempotency_key") if body.get(name) is not None]
    if not keys:
        return None
    if not all(isinstance(key, str) and key for key in keys):
        raise MalformedRequest("Expected a non-empty string for idempotencyKey")
    key = keys[0]
    if any(other != key for other in keys):
        raise InvalidParameter("idempotencyKey and idempotency_key differ: send one key.")
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidParameter(f"idempotencyKey is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters.")
    return key


def _long(body: dict[str, Any], key: str, limit: int = INT64_MAX) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    # The reference (scalapb) accepts numbers sent as JSON strings, e.g. "3".
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MalformedRequest(f"Not a numeric value: {value}")
    try:
        number = int(value)
    except ValueError:
        raise MalformedRequest(f"Not a numeric value: {value}") from None
    if abs(number) > limit:
        raise MalformedRequest(f"Not an int{'32' if limit == INT32_MAX else '64'} value: {value}")
    return number


def _bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise MalformedRequest(f"Expected a boolean for {key}: {value}")
    return value


def _string(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise MalformedRequest(f"Expected a string for {key}")
    return value


@dataclass(frozen=True)
class QueryRequest:
    predicate_hints: tuple[str, ...] = ()
    json_predicate_hints: str | None = None
    limit_hint: int | None = None
    version: int | None = None
    timestamp: str | None = None
    starting_version: int | None = None
    ending_version: int | None = None
    max_files: int | None = None
    page_token: str | None = None
    include_refresh_token: bool = False
    refresh_token: str | None = None
    include_historical_protocol: bool = False
    #: An async query's key (2026-07): not a parameter of what is read, so no page token pins it.
    idempotency_key: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> QueryRequest:
        body = body_object(raw)
        hints = body.get("predicateHints") or []
        if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
            raise MalformedRequest("Expected an array for repeated field predicateHints of QueryTableRequest")
        request = cls(
            predicate_hints=tuple(hints),
            json_predicate_hints=_string(body, "jsonPredicateHints"),
            limit_hint=_long(body, "limitHint"),
            version=_long(body, "version"),
            timestamp=_string(body, "timestamp"),
            starting_version=_long(body, "startingVersion"),
            ending_version=_long(body, "endingVersion"),
            max_files=_long(body, "maxFiles", INT32_MAX),
            page_token=_string(body, "pageToken"),
            include_refresh_token=_bool(body, "includeRefreshToken"),
            refresh_token=_string(body, "refreshToken"),
            include_historical_protocol=_bool(body, "includeHistoricalProtocol"),
            idempotency_key=_idempotency_key(body),
        )
        request.validate()
        return request

    def validate(self) -> None:
        chosen = [self.version is not None, self.timestamp is not None, self.starting_version is not None]
        if sum(chosen) > 1:
            raise InvalidParameter("Please only provide one of: version,timestamp,startingVersion")
        if self.version is not None and self.version < 0:
            raise InvalidParameter("table version cannot be negative.")
        if self.starting_version is not None and self.starting_version < 0:
            raise InvalidParameter("startingVersion cannot be negative.")
        if (
            self.starting_version is not None
            and self.ending_version is not None
            and self.starting_version > self.ending_version
        ):
            raise InvalidParameter(
                f"startingVersion({self.starting_version}) must be smaller than or equal to "
                f"endingVersion({self.ending_version})."
            )
        if self.max_files is not None and self.max_files <= 0:
            raise InvalidParameter("maxFiles must be positive.")
        if self.limit_hint is not None and self.limit_hint < 0:
            raise InvalidParameter("limitHint cannot be negative.")
        specific = any(chosen)
        if self.include_refresh_token and specific:
            raise InvalidParameter("includeRefreshToken cannot be used when querying a specific version.")
        if self.include_refresh_token and self.page_token:
            raise InvalidParameter("includeRefreshToken must be used in the first page request.")
        if self.refresh_token and specific:
            raise InvalidParameter("refreshToken cannot be used when querying a specific version.")
        if self.refresh_token and self.page_token:
            raise InvalidParameter("refreshToken must be used in the first page request.")

    def checksum(self) -> str:
        """What a page token pins: every parameter that shapes the file list."""
        shape = [
            self.version,
            self.timestamp,
            self.starting_version,
            self.ending_version,
            list(self.predicate_hints),
            self.json_predicate_hints,
            self.limit_hint,
        ]
        return hashlib.sha256(dumps(shape).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class QueryInfoRequest:
    """The body of an async query's poll, `POST …/queries/{queryId}`: the page it asks for."""

    max_files: int | None = None
    page_token: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> QueryInfoRequest:
        # The JVM client sends `queryId` too (ignored: the URL names the query), and no body is `{}`.
        body = body_object(raw) if raw.strip() else {}
        request = cls(_long(body, "maxFiles", INT32_MAX), _string(body, "pageToken"))
        if request.max_files is not None and request.max_files <= 0:
            raise InvalidParameter("maxFiles must be positive.")
        return request


def parse_bool(raw: str | None, name: str) -> bool:
    """Query-string booleans, case-insensitively: the Python client sends `True`."""
    if raw is None:
        return False
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidParameter(f"{name} must be true or false, not {raw!r}")
    return lowered == "true"


def _query_int(raw: str | None, name: str) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidParameter(f"{name} is not a valid number.") from None


@dataclass(frozen=True)
class ChangesRequest:
    """Parameters of `GET .../changes`, validated as the reference server does."""

    starting_version: int | None = None
    starting_timestamp: str | None = None
    ending_version: int | None = None
    ending_timestamp: str | None = None
    include_historical_metadata: bool = False
    include_historical_protocol: bool = False
    max_files: int | None = None
    page_token: str | None = None

    @classmethod
    def parse(cls, params: dict[str, str]) -> ChangesRequest:
        starting_version = params.get("startingVersion")
        starting_timestamp = params.get("startingTimestamp")
        ending_version = params.get("endingVersion")
        ending_timestamp = params.get("endingTimestamp")
        if starting_version is None and starting_timestamp is None:
            raise InvalidParameter("No startingVersion or startingTimestamp provided for CDF read.")
        if starting_version is not None and starting_timestamp is not None:
            raise InvalidParameter(
                "Multiple starting arguments provided for CDF read. Please provide one of either "
                "startingTimestamp or startingVersion."
            )
        if ending_version is not None and ending_timestamp is not None:
            raise InvalidParameter(
                "Multiple ending arguments provided for CDF read. Please provide one of either "
                "endingTimestamp or endingVersion."
            )
        max_files = params.get("maxFiles")
        if max_files is not None:
            try:
                max_files_value = int(max_files)
            except ValueError:
                raise InvalidParameter(
                    "expected a number but the string didn't have the appropriate format"
                ) from None
            if max_files_value <= 0:
                raise InvalidParameter("maxFiles must be positive.")
        request = cls(
            starting_version=_query_int(starting_version, "startingVersion"),
            starting_timestamp=starting_timestamp,
            ending_version=_query_int(ending_version, "endingVersion"),
            ending_timestamp=ending_timestamp,
            include_historical_metadata=parse_bool(
                params.get("includeHistoricalMetadata"), "includeHistoricalMetadata"
            ),
            include_historical_protocol=parse_bool(
                params.get("includeHistoricalProtocol"), "includeHistoricalProtocol"
            ),
            max_files=int(max_files) if max_files is not None else None,
            page_token=params.get("pageToken"),
        )
        if request.starting_version is not None and request.starting_version < 0:
            raise InvalidParameter("startingVersion cannot be negative.")
        if request.ending_version is not None and request.ending_version < 0:
            raise InvalidParameter("endingVersion cannot be negative.")
        return request

    def checksum(self) -> str:
        shape = [
            self.starting_version, self.starting_timestamp, self.ending_version,
            self.ending_timestamp, self.include_historical_metadata, self.include_historical_protocol,
        ]  # fmt: skip
        return hashlib.sha256(dumps(shape).encode()).hexdigest()[:32]
