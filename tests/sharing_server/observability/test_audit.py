"""The audit log's pieces: the request's fields (`note`, `audit_fields`), a refused token named by
its id only, and `AuditLog`'s destinations (a file reopened once rotated away, stdout, off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.requests import HTTPConnection

from share_store.errors import Unauthenticated
from sharing_server.observability.audit import (
    UNKNOWN_TOKEN,
    AuditLog,
    audit_fields,
    current_fields,
    note,
    note_refused_token,
)


def connection(*headers: tuple[bytes, bytes]) -> HTTPConnection:
    return HTTPConnection({"type": "http", "headers": list(headers)})


def test_note_adds_to_the_record_of_the_request_being_served_and_to_none_without_one() -> None:
    note(table="t")  # no request: nothing to add to, and no failure
    record: dict[str, object] = {"route": "query"}
    served = current_fields.set(record)
    try:
        note(table="t", version=3)
    finally:
        current_fields.reset(served)
    assert record == {"route": "query", "table": "t", "version": 3}
    assert current_fields.get() is None


def test_audit_fields_are_one_record_per_request() -> None:
    request = connection()
    audit_fields(request)["share"] = "s"
    assert audit_fields(request) == {"share": "s"}
    assert audit_fields(connection()) == {}


def test_a_refused_token_is_named_by_its_id_and_share_and_a_stranger_as_unknown() -> None:
    known = connection((b"authorization", b"Bearer dss_secret"))
    note_refused_token(known, Unauthenticated("the token expired", token_id="tok1", share="s"))
    assert audit_fields(known) == {"token_id": "tok1", "share": "s"}

    stranger = connection((b"authorization", b"Bearer dss_guessed"))
    note_refused_token(stranger, Unauthenticated("no such token"))
    assert audit_fields(stranger) == {"token_id": UNKNOWN_TOKEN}
    assert "dss_guessed" not in json.dumps(audit_fields(stranger))

    anonymous = connection()
    note_refused_token(anonymous, Unauthenticated("no token"))
    assert audit_fields(anonymous) == {}


def test_a_file_audit_log_writes_one_json_line_per_record_and_reopens_a_rotated_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(str(path))
    try:
        log.write({"route": "query", "status": 200, "time": tmp_path})  # what JSON lacks is a string
        path.rename(tmp_path / "audit.log.1")  # logrotate moves the file away
        log.write({"route": "list_shares", "status": 200})
    finally:
        log.close()
    assert json.loads((tmp_path / "audit.log.1").read_text()) == {
        "route": "query", "status": 200, "time": str(tmp_path),
    }  # fmt: skip
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"route": "list_shares", "status": 200}
    ]


def test_an_audit_log_goes_to_stdout_or_nowhere(capsys: pytest.CaptureFixture[str]) -> None:
    off = AuditLog("off")
    assert not off.enabled
    off.write({"route": "query"})
    off.close()
    assert capsys.readouterr().out == ""

    out = AuditLog("-")
    out.write({"route": "query", "status": 200})
    out.close()
    assert json.loads(capsys.readouterr().out) == {"route": "query", "status": 200}
