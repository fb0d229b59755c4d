"""The one strict read of a JSON object body (`http.json_text.json_object`), and the three surfaces
that word its refusals in their own error models: the admin API, the catalog's codec, the signers."""

from __future__ import annotations

import pytest

from share_store.errors import InvalidParameter
from sharing_server.catalog import codec
from sharing_server.http import json_text
from sharing_server.http.sign_requests import parse_sign_request


def test_an_object_is_read_and_a_surrogate_pair_is_one_character() -> None:
    assert json_text.json_object(b'{"a": [1, {"b": "\\ud83d\\ude00"}]}') == {"a": [1, {"b": "\U0001f600"}]}


@pytest.mark.parametrize(
    ("raw", "problem", "message"),
    [
        (b"{not json", "not json", "the request body is not valid JSON"),
        (b'{"a": NaN}', "not json", "the request body is not valid JSON"),
        (b"\xff\xfe{}", "not json", "the request body is not valid JSON"),
        (b"[" * 100_000, "not json", "the request body is not valid JSON"),
        (b"[1, 2]", "not an object", "the request body must be a JSON object"),
        (b'"\\ud800"', "not an object", "the request body must be a JSON object"),
        (b'{"a": "\\ud800"}', "lone surrogate", "the request body holds an unpaired UTF-16 surrogate"),
        (b'{"\\uDFFF": 1}', "lone surrogate", "the request body holds an unpaired UTF-16 surrogate"),
    ],
)
def test_what_is_not_a_json_object_is_refused_with_its_problem(
    raw: bytes, problem: str, message: str
) -> None:
    with pytest.raises(json_text.NotAJsonObject) as refused:
        json_text.json_object(raw)
    assert (refused.value.problem, refused.value.message, str(refused.value)) == (problem, message, message)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_lone_surrogate_escaped_in_a_utf16_or_utf32_body_is_found(encoding: str) -> None:
    # json.loads reads these encodings too; their escapes are not the UTF-8 bytes `\ud8`.
    raw = '{"a": "\\ud800"}'.encode(encoding)
    with pytest.raises(json_text.NotAJsonObject) as refused:
        json_text.json_object(raw)
    assert refused.value.problem == "lone surrogate"
    with pytest.raises(InvalidParameter, match="unpaired UTF-16 surrogate"):
        codec.json_object(raw)


def test_the_signer_words_a_lone_surrogate_anywhere_in_its_own_terms() -> None:
    raw = b'{"method": "GET", "uri": "u", "headers": {}, "region": "\\ud800"}'
    with pytest.raises(InvalidParameter, match="strings must be valid Unicode"):
        parse_sign_request(raw)
    with pytest.raises(InvalidParameter, match="the signing request must be a JSON object"):
        parse_sign_request(b'{"method": "GET", "uri": "u", "headers": {}, "n": NaN}')
