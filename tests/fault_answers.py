"""What the fault soak's clients got from the replicas (tests/fault_soak.py): every HTTP answer,
recorded as it came, and the checks made of the answers themselves: each error in its surface's
model with its request id (503s with `Retry-After`), and each audited with the status it had.

`Recorder.wrapping_requests` wraps `requests`' adapter, which pyiceberg and delta-sharing both
send through, and gives a timeout to any request that has none: a request that hangs is counted,
not waited for.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests.adapters

#: The longest an answer may take; clients give up at it (connect within 10 s).
HUNG = 60.0
CLIENT_TIMEOUT = (10.0, HUNG)


@dataclass
class Answer:
    """One HTTP answer (or failure to get one) a client got from a replica."""

    at: float
    method: str
    url: str
    path: str
    status: int | None  # None: no answer (the exception's name is in `failure`)
    elapsed: float
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    failure: str = ""


class Recorder:
    """Every answer the replicas give this process's clients, by the `requests` adapter and `send`."""

    def __init__(self, bases: list[str]) -> None:
        self.bases = bases
        self.answers: list[Answer] = []
        self._lock = threading.Lock()

    def path_of(self, url: str) -> str | None:
        for base in self.bases:
            if url.startswith(base):
                return url[len(base) :].split("?", 1)[0]
        return None

    def add(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)

    def record(self, method: str, url: str, started: float, response: Any, failure: str = "") -> None:
        path = self.path_of(url)
        if path is None:
            return  # S3 (files, signed URLs), not a replica's answer
        if response is None:
            self.add(Answer(started, method, url, path, None, time.monotonic() - started, failure=failure))
            return
        status = int(response.status_code)
        body = ""
        if status >= 400:
            body = response.text if hasattr(response, "text") else ""
        headers = {k.lower(): v for k, v in response.headers.items()}
        self.add(Answer(started, method, url, path, status, time.monotonic() - started, headers, body))

    @contextmanager
    def wrapping_requests(self) -> Iterator[None]:
        original = requests.adapters.HTTPAdapter.send
        recorder = self

        def send(adapter: requests.adapters.HTTPAdapter, request: Any, **kwargs: Any) -> Any:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = CLIENT_TIMEOUT
            started = time.monotonic()
            try:
                response = original(adapter, request, **kwargs)
            except Exception as error:
                recorder.record(request.method, request.url, started, None, type(error).__name__)
                raise
            recorder.record(request.method, request.url, started, response)
            return response

        requests.adapters.HTTPAdapter.send = send  # type: ignore[method-assign]
        try:
            yield
        finally:
            requests.adapters.HTTPAdapter.send = original  # type: ignore[method-assign]


def model_violations(answers: list[Answer]) -> list[str]:
    """Error answers not in their surface's model, or without a request id, or 503s without Retry-After."""
    found: list[str] = []
    for answer in answers:
        if answer.status is None or answer.status < 400:
            continue
        where = f"{answer.method} {answer.path} {answer.status}"
        if "x-request-id" not in answer.headers:
            found.append(f"{where}: no X-Request-Id")
        if answer.status == 503 and "retry-after" not in answer.headers:
            found.append(f"{where}: 503 without Retry-After")
        if answer.method == "HEAD":
            continue
        try:
            body = json.loads(answer.body)
        except ValueError:
            found.append(f"{where}: not JSON: {answer.body[:80]!r}")
            continue
        if answer.path.startswith(("/iceberg", "/_iceberg")):
            error = body.get("error") if isinstance(body, dict) else None
            if not (isinstance(error, dict) and {"message", "type", "code"} <= set(error)):
                found.append(f"{where}: not Iceberg's model: {answer.body[:120]}")
        elif not (isinstance(body, dict) and {"errorCode", "message"} <= set(body)):
            found.append(f"{where}: not Delta Sharing's model: {answer.body[:120]}")
    return found


def audit_mismatches(audit_logs: list[Path], answers: list[Answer]) -> list[str]:
    """Each answer a client got against its replica's audit line (in `audit_logs`), by
    `X-Request-Id`."""
    audited: dict[str, int] = {}
    for path in audit_logs:
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line still being written
            audited[record["request_id"]] = record["status"]
    found: list[str] = []
    for answer in answers:
        request_id = answer.headers.get("x-request-id")
        if answer.status is None or request_id is None or answer.path == "/healthz":
            continue  # no answer, or one with no id (model_violations counts those)
        if request_id not in audited:
            found.append(f"{answer.method} {answer.path} {answer.status}: no audit line")
        elif audited[request_id] != answer.status:
            found.append(f"{answer.method} {answer.path}: got {answer.status}, audited {audited[request_id]}")
    return found
