"""Faults across replicas (issue 53): three replicas on one PostgreSQL and one SeaweedFS, each reached
through a loopback fault proxy (testbed/fault_proxy.py), under a mixed load while faults come one at
a time; what every client saw, checked against what must hold.

The load, in threads, spread over the replicas: Delta Sharing recipients (`delta_sharing`'s
`load_as_pandas` of a static Delta table), Iceberg recipients (pyiceberg at `/iceberg`, scanning a
table the writers append to), pyiceberg writers appending through `/_iceberg` (each append's rows
carry ids of their own, and the acknowledged ones are recorded with their snapshot), and a provider
creating and revoking tokens through the admin API. The faults: PostgreSQL black-holed, its
connections reset, its port refused (as a stopped server); S3 black-holed, slowed, refused; each
for `FAULT_SECONDS`.

Every HTTP answer a replica gives to these clients is recorded (`requests`' adapter is wrapped,
as pyiceberg and delta-sharing both use it; it also sets a timeout where a client set none) so
that each error answer is checked against its surface's model.

`tests/end_to_end/test_faults_across_replicas.py` runs each fault once; `make soak` runs
`python -m tests.fault_soak` for `SOAK_SECONDS`, each fault repeated, and prints the report.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table
from sqlalchemy import make_url

from testbed.fault_proxy import FaultProxy
from testbed.seaweed import SeaweedS3, start_seaweed, upload_tree
from tests.conftest import TESTDATA
from tests.end_to_end.test_replicas import ADMIN_TOKEN, Replica
from tests.fault_answers import HUNG, Recorder, audit_mismatches
from tests.fault_outcome import (
    FAULT_SECONDS,
    RECOVERY_LIMIT,
    REVOKED_WITHIN,
    FaultRun,
    Ledger,
    Outcome,
    failed_checks,
)
from tests.postgres import start_postgres

DELTA_BUCKET = "faults"
DELTA = "delta-0.8.0-partitioned"
WAREHOUSE = "faultwh"
SHARE = "faults"
ROWS = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("writer", pa.string())])


@dataclass
class Rig:
    tmp: Path
    seaweed: SeaweedS3
    db: FaultProxy
    s3: FaultProxy
    replicas: list[Replica]
    recorder: Recorder
    token: str
    profile: dict[str, Any]
    expected_delta: pd.DataFrame

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        """An httpx request, recorded; None when no answer came."""
        started = time.monotonic()
        try:
            response = httpx.request(method, url, timeout=httpx.Timeout(HUNG, connect=10), **kwargs)
        except httpx.HTTPError as error:
            self.recorder.record(method, url, started, None, type(error).__name__)
            return None
        self.recorder.record(method, url, started, response)
        return response

    def admin(self, replica: Replica, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        return self.send(method, f"{replica.url}/admin/v1{path}", headers=headers, **kwargs)

    def profile_file(self, replica: Replica, token: str | None = None) -> str:
        path = self.tmp / f"{replica.port}-{uuid.uuid4().hex[:6]}.share"
        body = {**self.profile, "endpoint": replica.url + "/delta-sharing"}
        if token:
            body["bearerToken"] = token
        path.write_text(json.dumps(body))
        return str(path)

    def writer_catalog(self, replica: Replica) -> Catalog:
        return load_catalog(f"w-{uuid.uuid4().hex[:6]}", **{
            "type": "rest", "uri": f"{replica.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
            "s3.endpoint": self.seaweed.endpoint, "s3.access-key-id": self.seaweed.access_key,
            "s3.secret-access-key": self.seaweed.secret_key, "s3.region": self.seaweed.region,
            "s3.path-style-access": "true", "s3.connect-timeout": "10", "s3.request-timeout": "60",
        })  # fmt: skip

    def recipient_catalog(self, replica: Replica) -> Catalog:
        return load_catalog(f"r-{uuid.uuid4().hex[:6]}", **{
            "type": "rest", "uri": f"{replica.url}/iceberg", "token": self.token,
            "s3.connect-timeout": "10", "s3.request-timeout": "60",
        })  # fmt: skip


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    columns = sorted(frame.columns)
    return frame[columns].sort_values(columns).reset_index(drop=True)


@contextmanager
def rig(tmp: Path, store_url: str, seaweed: SeaweedS3) -> Iterator[Rig]:
    """Three replicas whose store and S3 go through fault proxies; a share of a Delta table and of the
    writers' Iceberg table, and a recipient's token."""
    url = make_url(store_url)
    with ExitStack() as stack:
        db = FaultProxy("127.0.0.1", url.port or 5432)
        stack.callback(db.close)
        s3_port = int(seaweed.endpoint.rsplit(":", 1)[1])
        s3 = FaultProxy("127.0.0.1", s3_port)
        stack.callback(s3.close)
        client = seaweed.client()
        client.create_bucket(Bucket=DELTA_BUCKET)
        upload_tree(client, TESTDATA / DELTA, DELTA_BUCKET, DELTA)
        proxied = url.set(port=db.port).render_as_string(hide_password=False)
        storage = seaweed.storage_config(path_style="true", endpoint=f"http://{s3.address}")
        settings = {f"SHARING_STORAGE_{k.upper()}": v for k, v in storage.items()}
        settings["SHARING_MAINTENANCE_BACKGROUND"] = "false"
        replicas: list[Replica] = []
        for name in ("a", "b", "c"):
            replicas.append(Replica(name, tmp, proxied, tmp / "unused", settings))
            stack.callback(replicas[-1].stop)
        for replica in replicas:
            replica.wait_ready()
        recorder = Recorder([replica.url for replica in replicas])
        stack.enter_context(recorder.wrapping_requests())
        first = replicas[0]
        head = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        created = httpx.post(f"{first.url}/_iceberg/v1/warehouses", json={"name": WAREHOUSE}, headers=head)
        assert created.status_code == 200, created.text
        partial = Rig(tmp, seaweed, db, s3, replicas, recorder, "", {}, pd.DataFrame())
        writer = partial.writer_catalog(first)
        writer.create_namespace("db")
        writer.create_table("db.events", schema=ROWS, properties={"format-version": "2"})
        # The recovery probes' commits go to a table of their own: on the writers' they would
        # lose races (409, retried) and time the writers' contention, not the replica's recovery.
        writer.create_table("db.probes", schema=ROWS, properties={"format-version": "2"})
        tables = ["s", f"d:delta:{DELTA_BUCKET}:{DELTA}", f"events:uniform:{WAREHOUSE}:db:events"]
        first.admin("POST", "/shares", json={"name": SHARE, "tables": tables})
        issued = first.admin("POST", f"/shares/{SHARE}/tokens", json={"expires": "2h"}).json()
        partial.token, partial.profile = issued["token"], issued["profile"]
        frame = delta_sharing.load_as_pandas(f"{partial.profile_file(first)}#{SHARE}.s.d")
        partial.expected_delta = canonical(frame)
        yield partial


# -- the load ------------------------------------------------------------------------------------


def ancestry(table: Table) -> set[int]:
    snapshot = table.current_snapshot()
    found: set[int] = set()
    while snapshot is not None:
        found.add(snapshot.snapshot_id)
        parent = snapshot.parent_snapshot_id
        snapshot = table.metadata.snapshot_by_id(parent) if parent is not None else None
    return found


def _loop(stop: threading.Event, ledger: Ledger, name: str, step: Callable[[int], None]) -> None:
    n = 0
    while not stop.is_set():
        try:
            step(n)
        except Exception as error:  # every client failure is counted; the answers are checked apart
            kind = f"{name}: {type(error).__name__}"
            with ledger.lock:
                ledger.client_failures[kind] += 1
                ledger.failure_examples.setdefault(kind, (time.monotonic(), str(error)[:160]))
            time.sleep(0.2)
        n += 1


def delta_reader(rig: Rig, ledger: Ledger, index: int) -> Callable[[int], None]:
    profiles = [rig.profile_file(replica) for replica in rig.replicas]

    def step(n: int) -> None:
        frame = delta_sharing.load_as_pandas(f"{profiles[(n + index) % 3]}#{SHARE}.s.d")
        same = canonical(frame).equals(rig.expected_delta)
        with ledger.lock:
            ledger.delta_reads += 1
            if not same:
                ledger.wrong_delta.append(f"{len(frame)} rows")
        time.sleep(0.2)

    return step


def iceberg_reader(rig: Rig, ledger: Ledger, index: int) -> Callable[[int], None]:
    catalogs: dict[int, Catalog] = {}

    def step(n: int) -> None:
        which = (n + index) % 3
        if which not in catalogs:
            catalogs[which] = rig.recipient_catalog(rig.replicas[which])
        table = catalogs[which].load_table("s.events")
        ids = [str(value) for value in table.scan().to_arrow()["id"].to_pylist()]
        with ledger.lock:
            ledger.iceberg_reads.append((ancestry(table), ids))
        time.sleep(0.2)

    return step


def writer(rig: Rig, ledger: Ledger, index: int) -> Callable[[int], None]:
    catalog = rig.writer_catalog(rig.replicas[index % 3])

    def step(n: int) -> None:
        ids = [f"w{index}-{n}-{k}" for k in range(3)]
        table = catalog.load_table("db.events")
        try:
            table.append(pa.table({"id": ids, "writer": [f"w{index}"] * 3}, schema=ROWS))
        except Exception:
            with ledger.lock:
                ledger.failed.update(ids)
            raise
        snapshot = table.current_snapshot()
        assert snapshot is not None
        with ledger.lock:
            ledger.acked.update(dict.fromkeys(ids, snapshot.snapshot_id))
        time.sleep(0.1)

    return step


def provider(rig: Rig, ledger: Ledger) -> Callable[[int], None]:
    def step(n: int) -> None:
        made_on, revoked_on = rig.replicas[n % 3], rig.replicas[(n + 1) % 3]
        issued = rig.admin(made_on, "POST", f"/shares/{SHARE}/tokens", json={"expires": "1h"})
        if issued is None or issued.status_code >= 300:
            raise RuntimeError(f"token not made: {issued.status_code if issued else 'no answer'}")
        token, token_id = issued.json()["token"], issued.json()["id"]
        revoked = rig.admin(revoked_on, "DELETE", f"/shares/{SHARE}/tokens/{token_id}")
        if revoked is None or revoked.status_code >= 300:
            raise RuntimeError(f"token not revoked: {revoked.status_code if revoked else 'no answer'}")
        acked = time.monotonic()
        with ledger.lock:
            ledger.revoked += 1
        time.sleep(REVOKED_WITHIN)  # then no replica may serve it
        for replica in rig.replicas:
            answer = rig.send(
                "GET", f"{replica.url}/delta-sharing/shares", headers={"Authorization": f"Bearer {token}"}
            )
            if answer is not None and answer.status_code < 300:
                with ledger.lock:
                    ledger.revocation_misses.append(
                        f"{replica.url} served a token revoked {time.monotonic() - acked:.1f} s before"
                    )
        time.sleep(0.3)

    return step


# -- faults and recovery --------------------------------------------------------------------------


def inject(rig: Rig, name: str, seconds: float) -> FaultRun:
    started = time.monotonic()
    if name == "db-paused":
        with rig.db.paused():
            time.sleep(seconds)
    elif name == "db-reset":
        while time.monotonic() - started < seconds:
            rig.db.reset()
            time.sleep(0.5)
    elif name == "s3-paused":
        with rig.s3.paused():
            time.sleep(seconds)
    elif name == "s3-slowed":
        with rig.s3.slowed(1.0):
            time.sleep(seconds)
    elif name in ("db-refused", "s3-refused"):
        # As a stopped server: open connections reset, new ones refused, then back on the same port.
        proxy = rig.db if name == "db-refused" else rig.s3
        proxy.stop()
        try:
            time.sleep(seconds)
        finally:
            proxy.start()
    else:
        raise ValueError(name)
    return FaultRun(name, started, time.monotonic())


FAULTS = ("db-paused", "db-reset", "db-refused", "s3-paused", "s3-slowed", "s3-refused")


def recover(rig: Rig, run: FaultRun) -> None:
    """How long after the fault's end each replica answers healthz, a read and a commit."""

    def probe(index: int, replica: Replica) -> None:
        deadline = run.ended + RECOVERY_LIMIT * 2
        while time.monotonic() < deadline:
            if _healthy(rig, replica, f"{run.name}-{index}-{uuid.uuid4().hex[:6]}"):
                run.recovery[replica.url] = time.monotonic() - run.ended
                return
            time.sleep(0.5)

    probes = [threading.Thread(target=probe, args=pair, daemon=True) for pair in enumerate(rig.replicas)]
    for thread in probes:
        thread.start()
    for thread in probes:
        thread.join()


def _healthy(rig: Rig, replica: Replica, probe_id: str) -> bool:
    health = rig.send("GET", f"{replica.url}/healthz")
    if health is None or health.status_code != 200:
        return False
    head = {"Authorization": f"Bearer {rig.token}"}
    read = rig.send("POST", f"{replica.url}/delta-sharing/shares/{SHARE}/schemas/s/tables/d/query", json={},
                    headers=head)  # fmt: skip
    if read is None or read.status_code != 200:
        return False
    try:
        table = rig.writer_catalog(replica).load_table("db.probes")
        table.append(pa.table({"id": [probe_id], "writer": ["probe"]}, schema=ROWS))
    except Exception:
        return False
    return True


# -- checks ---------------------------------------------------------------------------------------


def rss_kib(replica: Replica) -> int:
    for line in Path(f"/proc/{replica.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run(rig: Rig, seconds: float, writers: int = 2, readers: int = 1) -> Outcome:
    """The load for `seconds` at least, each fault once per round, rounds until the time is spent."""
    ledger = Ledger()
    stop = threading.Event()
    steps: list[tuple[str, Callable[[int], None]]] = [("provider", provider(rig, ledger))]
    steps += [(f"writer-{i}", writer(rig, ledger, i)) for i in range(writers)]
    steps += [(f"delta-{i}", delta_reader(rig, ledger, i)) for i in range(readers)]
    steps += [(f"iceberg-{i}", iceberg_reader(rig, ledger, i)) for i in range(readers)]
    threads = [
        threading.Thread(target=_loop, args=(stop, ledger, name, step), name=name, daemon=True)
        for name, step in steps
    ]
    rss_before = {r.url: rss_kib(r) for r in rig.replicas}
    began = time.monotonic()
    for thread in threads:
        thread.start()
    runs: list[FaultRun] = []
    time.sleep(3)  # the load under way before the first fault
    while True:
        for name in FAULTS:
            fault = inject(rig, name, FAULT_SECONDS)
            recover(rig, fault)
            runs.append(fault)
            time.sleep(2)
        if time.monotonic() - began >= seconds:
            break
    stop.set()
    for thread in threads:
        thread.join(timeout=HUNG + 10)
    stuck = sum(thread.is_alive() for thread in threads)
    table = rig.writer_catalog(rig.replicas[0]).load_table("db.events")
    final = Counter(str(value) for value in table.scan().to_arrow()["id"].to_pylist())
    version_zero = {r.url: _query_status(rig, r, {"version": 0}) for r in rig.replicas}
    time.sleep(1.5)  # a request's audit line is written after its last byte
    answers = list(rig.recorder.answers)
    audit_logs = [r.log_path.with_name(f"{r.log_path.stem}-audit.log") for r in rig.replicas]
    return Outcome(
        runs, ledger, answers, final,
        {r.url: rss_kib(r) for r in rig.replicas}, {r.url: r.process.poll() is None for r in rig.replicas},
        stuck, time.monotonic() - began, audit_mismatches(audit_logs, answers), version_zero,
        {r.url: len(os.listdir(f"/proc/{r.process.pid}/fd")) for r in rig.replicas},
        {"postgresql": rig.db.open_connections(), "s3": rig.s3.open_connections()}, rss_before,
    )  # fmt: skip


def _query_status(rig: Rig, replica: Replica, body: dict[str, Any]) -> int | None:
    path = f"/delta-sharing/shares/{SHARE}/schemas/s/tables/events/query"
    head = {"Authorization": f"Bearer {rig.token}"}
    answer = rig.send("POST", replica.url + path, json=body, headers=head)
    return answer.status_code if answer is not None else None


def main() -> int:
    """`make soak`: its own PostgreSQL and SeaweedFS, the scenario for SOAK_SECONDS, the report."""
    seconds = float(os.environ.get("SOAK_SECONDS", "600"))
    # pyiceberg warns of each retried 409 (writers racing each other): hundreds of lines an hour.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="fault-soak-"))
    postgres = start_postgres()
    seaweed = start_seaweed(tmp / "seaweed")
    try:
        with rig(tmp, postgres.create_database("soak"), seaweed) as setup:
            outcome = run(setup, seconds, writers=int(os.environ.get("SOAK_WRITERS", "3")))
        print(outcome.report())
        failures = failed_checks(outcome)
        print("checks: " + ("all held" if not failures else "FAILED\n    " + "\n    ".join(failures)))
        return 1 if failures else 0
    finally:
        seaweed.stop()
        postgres.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
