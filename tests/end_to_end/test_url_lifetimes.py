"""URLs that last the read (issue 51): an answer's URLs live longer the more files it hands out,
up to the provider's ceiling, and never past the expiry of the token they were signed for."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from sharing_server.config import ConfigError, load_config
from tests.conftest import TESTDATA_BUCKET, Deployment

# 10 minutes per file: a table of 9 files earns 90 minutes, over the base hour, under the ceiling.
PER_FILE_MS = 600_000
CEILING = 4 * 3600


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    return {
        "SHARING_LIMITS_URL_LIFETIME_PER_FILE_MS": str(PER_FILE_MS),
        "SHARING_LIMITS_URL_LIFETIME_MAX": str(CEILING),
    }


@pytest.fixture(scope="module")
def table(server: Deployment) -> str:
    uri = str(Path(server.config.storage["root"]) / TESTDATA_BUCKET / "events")
    for start in range(0, 90, 10):  # nine versions, a file each
        rows = pa.table({"id": list(range(start, start + 10))})
        write_deltalake(uri, rows, mode="append", configuration={"delta.enableChangeDataFeed": "true"})
    server.share_tables("long", {"events": "events"}, schema="s")
    return uri


def expirations(server: Deployment, token: str, path: str = "query", **body: Any) -> list[float]:
    """Seconds from now to each file's URL expiry, in the answer to `/query` (or `/changes`)."""
    headers = {"Authorization": f"Bearer {token}"}
    base = f"{server.endpoint}/shares/long/schemas/s/tables/events"
    if path == "query":
        answer = httpx.post(f"{base}/query", json=body, headers=headers)
    else:
        answer = httpx.get(f"{base}/changes", params=body, headers=headers)
    assert answer.status_code == 200, answer.text
    now = time.time()
    lines = [json.loads(line) for line in answer.text.splitlines()]
    found = [
        action["expirationTimestamp"] / 1000 - now
        for line in lines
        for kind, action in line.items()
        if kind in ("file", "add", "cdf", "remove")
    ]
    assert found
    return found


def test_an_answers_urls_live_an_allowance_per_file_it_hands_out(server: Deployment, table: str) -> None:
    token = server.token("long", timedelta(days=1))
    lifetimes = expirations(server, token)
    assert len(lifetimes) == 9
    assert all(abs(seconds - 9 * PER_FILE_MS / 1000) < 5 for seconds in lifetimes)
    # An answer cut by a hint to fewer files still counts the snapshot's (what the client may
    # read next), so the page lives as long: never shorter than the base.
    assert all(seconds > 3600 - 5 for seconds in expirations(server, token, limitHint=1))
    # A change read's URLs: the range's files (nine, from version 0).
    assert all(abs(s - 9 * PER_FILE_MS / 1000) < 5 for s in expirations(server, token, "changes",
                                                                    startingVersion="0"))  # fmt: skip
    # The URLs work.
    answer = httpx.post(f"{server.endpoint}/shares/long/schemas/s/tables/events/query", json={},
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    url = json.loads(answer.text.splitlines()[2])["file"]["url"]
    assert httpx.get(url).status_code == 200


def test_no_url_outlives_the_token_it_was_signed_for(server: Deployment, table: str) -> None:
    token = server.token("long", timedelta(minutes=10))
    assert all(seconds <= 600 + 1 for seconds in expirations(server, token))
    assert all(seconds <= 600 + 1 for seconds in expirations(server, token, "changes", startingVersion="0"))
    profile = server.tmp / "short.share"
    profile.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": server.endpoint,
                                   "bearerToken": token}))  # fmt: skip
    assert len(delta_sharing.load_as_pandas(f"{profile}#long.s.events")) == 90


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("SHARING_LIMITS_URL_LIFETIME_MAX", "700000", "7 days"),
        ("SHARING_LIMITS_URL_LIFETIME_MAX", "10", "60 to"),
        ("SHARING_LIMITS_URL_LIFETIME_PER_FILE_MS", "-1", "0 or more"),
        ("SHARING_LIMITS_URL_LIFETIME_PER_FILE_MS", "nan", "0 or more"),
    ],
)
def test_settings_past_what_can_be_signed_are_refused(
    tmp_path: Path, key: str, value: str, words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(env={"SHARING_SERVER_DATA_DIR": str(tmp_path), key: value})
