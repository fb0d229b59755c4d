"""What a started server loads as it settles: the writable catalog's modules only where it has own
warehouses, so a server that only shares holds 17 MB less, and one with warehouses answers its
first catalog request without waiting for them.

A real `serve` process, seen from outside: a module's compiled extension is in the process's
memory map once the module is imported."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from testbed.seaweed import free_port
from tests.served import served

PACKAGES = Path(__import__("pyarrow").__file__).parent.parent
#: Extensions only the catalog's modules load: cryptography's bindings (the sealed secrets of its
#: SigV4 callers) and pyarrow's dataset module (pyiceberg's pyarrow FileIO, which reads manifests).
CATALOG_ONLY = ("cryptography/hazmat/bindings/_rust", "pyarrow/_dataset.")
#: Loaded by every server as it settles, just before the catalog's modules.
ALWAYS = "pandas/_libs/lib."


def mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def wait_for(pid: int, *paths: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all(path in mapped(pid) for path in paths):
        assert time.monotonic() < deadline, f"not loaded within {timeout} s: {paths}"
        time.sleep(0.2)


def test_the_catalogs_modules_load_as_a_server_starts_only_where_it_has_own_warehouses(
    tmp_path: Path,
) -> None:
    config, port = tmp_path / "sharing.toml", free_port()
    config.write_text(f'[server]\nhost = "127.0.0.1"\nport = {port}\ndata_dir = "{tmp_path / "data"}"\n')

    with served(config, port, tmp_path / "first.log") as process:
        wait_for(process.pid, ALWAYS)
        time.sleep(3)  # what would come next has had its time
        loaded = mapped(process.pid)
        assert not [path for path in CATALOG_ONLY if path in loaded]

    command = [
        sys.executable,
        "-m",
        "sharing_server",
        "--config",
        str(config),
        "table",
        "warehouse",
        "create",
    ]
    subprocess.run([*command, "lake"], check=True, capture_output=True)

    with served(config, port, tmp_path / "second.log") as process:
        wait_for(process.pid, ALWAYS, *CATALOG_ONLY)
