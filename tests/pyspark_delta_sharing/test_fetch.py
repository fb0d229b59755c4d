"""The deltaSharing source on executors: retries, expired URLs, and a worker Python without it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from deltalake import write_deltalake

from pyspark_delta_sharing import fetch, files
from pyspark_delta_sharing.files import TableLayout, read_file, read_files
from pyspark_delta_sharing.listing import list_snapshot
from pyspark_delta_sharing.source import DeltaSharingDataSource, FilePartition, ReadOptions
from tests.conftest import Deployment
from tests.handmade_delta import write_mapped

BODY = bytes(range(256)) * 40


class Scripted(BaseHTTPRequestHandler):
    """Answers each GET with the next status of the server's script, then with the body (ranges too)."""

    def do_GET(self) -> None:
        script: list[int] = self.server.script  # type: ignore[attr-defined]
        self.server.requests.append(self.headers.get("Range"))  # type: ignore[attr-defined]
        status = script.pop(0) if script else 200
        if status == -1:  # hang up without an answer
            self.connection.close()
            return
        if status != 200:
            self.send_response(status)
            self.send_header("Content-Length", "7")
            self.end_headers()
            self.wfile.write(b"go away")
            return
        body, code = BODY, 200
        wanted = self.headers.get("Range")
        if wanted and not getattr(self.server, "ignore_ranges", False):
            first, last = wanted.removeprefix("bytes=").split("-")
            body, code = BODY[int(first) : int(last) + 1], 206
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    monkeypatch.setattr(fetch, "FIRST_DELAY_S", 0.01)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script = []  # type: ignore[attr-defined]
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/file?X-Amz-Signature=s"


def test_throttling_and_server_errors_are_retried(storage: ThreadingHTTPServer) -> None:
    storage.script[:] = [429, 503, -1, 500]  # type: ignore[attr-defined]
    assert fetch.get(url(storage)) == BODY
    assert len(storage.requests) == 5  # type: ignore[attr-defined]
    storage.script[:] = [502]  # type: ignore[attr-defined]
    assert fetch.get(url(storage), 100, 50) == BODY[100:150]
    assert storage.requests[-1] == "bytes=100-149"  # type: ignore[attr-defined]


def test_retries_give_up_and_expired_urls_are_not_retried(storage: ThreadingHTTPServer) -> None:
    storage.script[:] = [503] * fetch.ATTEMPTS  # type: ignore[attr-defined]
    with pytest.raises(fetch.FetchError, match=f"gave up after {fetch.ATTEMPTS} attempts \\(HTTP 503\\)"):
        fetch.get(url(storage))
    storage.script[:] = [403]  # type: ignore[attr-defined]
    with pytest.raises(fetch.ExpiredUrl) as raised:
        fetch.get(url(storage))
    assert "X-Amz-Signature" not in str(raised.value)  # signatures stay out of error messages
    storage.script[:] = [404]  # type: ignore[attr-defined]
    with pytest.raises(fetch.FetchError, match="HTTP 404"):
        fetch.get(url(storage))


def test_a_server_that_ignores_ranges_still_gives_the_range(storage: ThreadingHTTPServer) -> None:
    storage.ignore_ranges = True  # type: ignore[attr-defined]
    assert fetch.get(url(storage), 10, 5) == BODY[10:15]


# -- expired URLs, data files and deletion vector files alike ---------------------------------------------


@pytest.fixture(scope="module")
def mapped(local: Deployment) -> str:
    """A shared table with deletion vectors in a file and inline, its columns mapped by name."""
    write_mapped(local.storage.root / "fetching" / "mapped", "name")
    local.share_tables("fetching", {"mapped": "mapped"}, bucket="fetching")
    return f"{local.profile('fetching')}#fetching.default.mapped"


def broken(url: str) -> str:
    """The URL with a signature the server refuses, as it refuses an expired one (403)."""
    return url.replace("X-Amz-Signature=", "X-Amz-Signature=0")


def test_expired_data_and_vector_urls_are_renewed_once(mapped: str) -> None:
    options = ReadOptions.parse({"path": mapped})
    listing = list_snapshot(options.profile, options.table, options.response_format)
    layout = TableLayout.of(listing)
    schema = pa.schema([pa.field("id", pa.int64())])
    fresh = next(f for f in listing.files if f.get("deletion_vector", {}).get("storageType") == "p")
    vector = fresh["deletion_vector"]
    stale = fresh | {
        "url": broken(fresh["url"]),
        "deletion_vector": vector | {"pathOrInlineDv": broken(vector["pathOrInlineDv"])},
    }
    with pytest.raises(fetch.ExpiredUrl):
        list(read_file(stale, schema, layout))
    renewed = []

    def renew(file: dict[str, Any]) -> dict[str, Any]:
        renewed.append(file["key"])
        return fresh

    got = [row for batch in read_file(stale, schema, layout, renew=renew) for row in batch.to_pylist()]
    expected = [row for batch in read_file(fresh, schema, layout) for row in batch.to_pylist()]
    assert got == expected and len(got) > 0
    assert renewed == [fresh["key"]]  # once, for the vector and the data file both


@pytest.fixture(scope="module")
def wide(local: Deployment) -> str:
    """A table of one file of some 7 MB, a tenth of it the `id` column."""
    ids = pa.array(range(100_000), pa.int64())
    text = pa.array([hashlib.sha256(str(i).encode()).hexdigest() for i in range(100_000)])
    write_deltalake(str(local.storage.root / "fetching" / "wide"), pa.table({"id": ids, "text": text}))
    local.share_tables("fetching_wide", {"wide": "wide"}, bucket="fetching")
    return f"{local.profile('fetching_wide')}#fetching_wide.default.wide"


def test_a_projection_of_a_large_file_reads_only_its_columns_byte_ranges(wide: str, monkeypatch) -> None:
    """Past SMALL_FILE_BYTES a file is read by ranges: the footer and the wanted column's chunks."""
    options = ReadOptions.parse({"path": wide})
    listing = list_snapshot(options.profile, options.table, options.response_format)
    layout = TableLayout.of(listing)
    (file,) = listing.files
    schema = pa.schema([pa.field("id", pa.int64())])
    monkeypatch.setattr(files, "SMALL_FILE_BYTES", 0)
    fetched: list[int | None] = []
    real_get = fetch.get

    def counting_get(url: str, start: int | None = None, length: int | None = None) -> bytes:
        fetched.append(length)
        return real_get(url, start, length)

    monkeypatch.setattr(fetch, "get", counting_get)
    rows = [row["id"] for batch in read_file(file, schema, layout) for row in batch.to_pylist()]
    assert rows == list(range(100_000))
    assert None not in fetched  # never the whole file
    assert sum(n or 0 for n in fetched) < file["size"] / 4, (fetched, file["size"])


def test_urls_about_to_expire_are_renewed_before_they_are_read(mapped: str) -> None:
    source = DeltaSharingDataSource({"path": mapped})
    schema = source.schema()
    reader = source.reader(schema)
    partitions = reader.partitions()
    files = [file for partition in partitions for file in partition.files]
    # Every URL expires in a minute and is already refused: only a fresh listing can read them.
    stale = [f | {"url": broken(f["url"]), "expiration": time.time() * 1000 + 60_000} for f in files]
    layout, version = partitions[0].layout, partitions[0].version
    batches = list(reader.read(FilePartition(stale, layout, version)))
    assert sum(batch.num_rows for batch in batches) == 10


def test_a_long_task_lists_again_when_the_urls_it_kept_near_expiry(mapped: str) -> None:
    source = DeltaSharingDataSource({"path": mapped})
    reader = source.reader(source.schema())
    (partition, *_) = reader.partitions()
    file = partition.files[0]
    # URLs renewed earlier in the task, which have since expired in turn.
    reader._fresh = {file["key"]: file | {"url": broken(file["url"]), "expiration": 0}}
    renewed = reader.renew(file, partition.version)
    assert renewed["url"] != broken(file["url"])
    assert renewed["expiration"] > time.time() * 1000


# -- a task's files: the next one fetched while this one is read ---------------------------------------


def _settled() -> None:
    """Wait for the prefetch thread to finish what it was given (it takes one job at a time, in order)."""
    files._prefetcher().submit(lambda: None).result()


def fetched_urls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs the source fetches from now on, in order (the fetches themselves are real)."""
    fetched: list[str] = []
    real_get = fetch.get

    def recording_get(url: str, start: int | None = None, length: int | None = None) -> bytes:
        fetched.append(url)
        return real_get(url, start, length)

    monkeypatch.setattr(fetch, "get", recording_get)
    return fetched


def test_a_task_reads_its_files_in_order_fetching_the_next_one_ahead(mapped: str, monkeypatch) -> None:
    options = ReadOptions.parse({"path": mapped})
    listing = list_snapshot(options.profile, options.table, options.response_format)
    layout = TableLayout.of(listing)
    schema = pa.schema([pa.field("id", pa.int64())])
    task = sorted(listing.files, key=lambda f: f["key"])
    assert len(task) >= 3 and any(f.get("deletion_vector") for f in task)
    one_by_one = [[row["id"] for b in read_file(f, schema, layout) for row in b.to_pylist()] for f in task]
    fetched = fetched_urls(monkeypatch)
    batches = read_files(task, schema, layout)
    first = next(batches)
    _settled()
    # While the first file's batches go out, the second file is already here; the third is not asked for.
    assert task[1]["url"] in fetched and task[2]["url"] not in fetched
    rows = [row["id"] for batch in [first, *batches] for row in batch.to_pylist()]
    # Each file's rows in the file's order, its deleted positions left out: as one file at a time.
    assert rows == [row for file_rows in one_by_one for row in file_rows]


def test_a_task_stopped_early_fetches_no_more_files(mapped: str, monkeypatch) -> None:
    options = ReadOptions.parse({"path": mapped})
    listing = list_snapshot(options.profile, options.table, options.response_format)
    layout = TableLayout.of(listing)
    task = sorted(listing.files, key=lambda f: f["key"])
    fetched = fetched_urls(monkeypatch)
    batches = read_files(task, pa.schema([pa.field("id", pa.int64())]), layout)
    next(batches)
    batches.close()  # as a limit stops the task
    _settled()
    assert {f["url"] for f in task[2:]}.isdisjoint(fetched)


def test_a_failed_fetch_of_the_next_file_fails_the_task_when_that_file_is_reached(mapped: str) -> None:
    options = ReadOptions.parse({"path": mapped})
    listing = list_snapshot(options.profile, options.table, options.response_format)
    layout = TableLayout.of(listing)
    task = sorted(listing.files, key=lambda f: f["key"])[:2]
    task[1] = task[1] | {"url": broken(task[1]["url"])}
    batches = read_files(task, pa.schema([pa.field("id", pa.int64())]), layout)
    assert next(batches).num_rows > 0  # the first file reads
    with pytest.raises(fetch.ExpiredUrl):
        list(batches)


# -- a worker Python that lacks the source's dependencies --------------------------------------------------


def spark_python_path() -> str:
    """What Spark puts on its Python workers' path: its own zips (PySpark, py4j), then the project."""
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(path) for path in lib.glob("*.zip"))
    return os.pathsep.join([*zips, str(Path(__file__).resolve().parents[2])])


LOOKUP = """
from importlib import import_module
from pkgutil import iter_modules
from pyspark.sql.datasource import DataSource
# What pyspark.sql.worker.lookup_data_sources does to find Python data sources.
found = {}
for info in iter_modules():
    if info.name.startswith("pyspark_"):
        module = import_module(info.name)
        if issubclass(getattr(module, "DefaultSource", object), DataSource):
            found[module.DefaultSource.name()] = module.DefaultSource
print(sorted(found))
try:
    found["deltaSharing"]({"path": "/nowhere.share#a.b.c"}).schema()
except ImportError as error:
    print(type(error).__name__, error)
"""


def test_a_worker_python_without_the_dependencies_finds_the_source_and_says_what_to_set() -> None:
    """Spark starts its workers with another Python: the source is found and names the setting.

    Modelled by this interpreter without its site-packages (`-S`): PySpark and the
    project come from Spark's worker path, pyarrow and the rest are missing.
    """
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": spark_python_path(),
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", LOOKUP], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    found, error = done.stdout.strip().splitlines()
    assert found == "['deltaSharing']"
    assert error.startswith("MissingDependencies The deltaSharing data source runs in the Python")
    assert "cannot import pyarrow" in error
    assert sys.executable in error  # this interpreter, which PySpark's environment is
    assert "PYSPARK_PYTHON" in error and "spark.pyspark.python" in error


def test_the_advice_points_at_the_environment_when_the_worker_is_another_python(tmp_path: Path) -> None:
    other = Path("/usr/bin/python3")
    has_pyarrow = (
        other.exists() and subprocess.run([other, "-c", "import pyarrow"], check=False).returncode == 0
    )
    if not other.exists() or has_pyarrow:
        pytest.skip("needs a system Python without pyarrow")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": spark_python_path(),
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
    }
    done = subprocess.run(
        [other, "-c", LOOKUP], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    error = done.stdout.strip().splitlines()[-1]
    venv_python = Path(pyspark.__file__).parents[4] / "bin" / "python"
    assert f"Set PYSPARK_PYTHON={venv_python}" in error, error
