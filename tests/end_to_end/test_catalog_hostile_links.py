"""Attacks on the writable catalog with symbolic links, which only local storage has.

The attacker of `test_catalog_hostile_more` writes inside its own table's folder on
local storage, links included, and plants them between the server's check of a file
and its use of it: a URL signed, a purge's list made, a manifest path with `..`.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestFile,
)
from pyiceberg.typedef import Record

from tests.catalog_attacks import (
    ATT,
    ROWS,
    V2,
    assert_intact,
    make_victim,
    rand,
    rows_table,
    split,
)
from tests.catalog_worlds import (
    World,
    adds_of,
    current_manifests,
    hinted,
    local_path,
    make_world,
    name_of,
    new_snapshot_id,
    own_table,
    query,
    share,
    snapshot_updates,
    statistics_naming,
    write_bytes,
    write_manifest,
)
from tests.conftest import Deployment


@pytest.fixture(scope="module")
def local_world(local: Deployment) -> World:
    """For the attacks with symbolic links, which only local storage has."""
    return make_world(local)


def test_a_signed_url_does_not_follow_a_link_planted_after_signing(local_world: World) -> None:
    """`TableLocation.confine` resolves the file's real path when the URL is signed; the file server
    (`serve_file` → `LocalStorage.resolve`) resolves it again when the URL is fetched and refuses only
    links out of the bucket. The attacker's table names `<own location>/stash/<name of a victim's data
    file>`, a file of its own when its share is queried; then it makes `stash` a link to the victim's
    data folder (same warehouse) and fetches the URL it was handed: the victim's bytes."""
    world = local_world
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    stolen = victim.data_files[0]  # known by name (GetTable shows it), never readable by the attacker
    own = own_table(world)
    template = next(iter(own.scan().plan_files())).file
    stash = f"{own.location()}/stash"
    decoy = f"{stash}/{stolen.rsplit('/', 1)[1]}"
    write_bytes(own, decoy, world.deployment.storage.read(*split(world.deployment, template.file_path)))
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=decoy, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=template.record_count, file_size_in_bytes=template.file_size_in_bytes,
    )  # fmt: skip
    snapshot_id = new_snapshot_id()
    manifest = write_manifest(own, snapshot_id, [data_file], False)
    assert (
        world.attack(snapshot_updates(own, snapshot_id, [manifest], "overwrite"), name_of(own)).status_code
        == 200
    )
    urls = [a["url"] for a in adds_of(query(world, share(world, world.wh, ATT, name_of(own))))]
    assert len(urls) == 1

    folder = local_path(world, stash)
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
    folder.symlink_to(local_path(world, stolen).parent, target_is_directory=True)
    fetched = httpx.get(urls[0], timeout=60)

    victim_bytes = victim.files[split(world.deployment, stolen)[1]]
    assert fetched.content != victim_bytes, (
        "the URL signed for the attacker's file served the victim's data file"
    )


# -- 3. two creates at overlapping locations, at once ---------------------------------------------


def test_a_purge_does_not_follow_a_link_planted_while_it_reads_manifests(
    local_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`purge` confines every path it will delete (real path included) while it walks the table's
    metadata, reading each snapshot's manifests in between, and only then deletes:
    `LocalStorage.delete` resolves each key again, links and all, and unlinks what it leads to.
    The attacker's table names `<own location>/stash/<name of a victim's data file>` as a
    statistics file (a file of its own when checked); while the purge reads manifests (a window
    as long as the table has manifests to read; the hook below stands for the attacker's timing)
    `stash` becomes a link to the victim's data folder."""
    from share_store.catalog import file_io

    world = local_world
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    stolen = victim.data_files[0]
    own = own_table(world)
    stash = f"{own.location()}/stash"
    write_bytes(own, f"{stash}/{stolen.rsplit('/', 1)[1]}", b"mine")
    assert (
        world.attack(statistics_naming(own, f"{stash}/{stolen.rsplit('/', 1)[1]}"), name_of(own)).status_code
        == 200
    )
    folder, target = local_path(world, stash), local_path(world, stolen).parent

    class Timed(file_io.ConfinedFileIO):  # type: ignore[misc]
        def new_input(self, location: str) -> Any:
            if not folder.is_symlink():  # the attacker's move, once the statistics file was checked
                for entry in folder.iterdir():
                    entry.unlink()
                folder.rmdir()
                folder.symlink_to(target, target_is_directory=True)
            return super().new_input(location)

    monkeypatch.setattr(file_io, "ConfinedFileIO", Timed)
    world.attacker.call("DELETE", world.own_path(name_of(own)) + "?purgeRequested=true")
    monkeypatch.undo()

    assert_intact(world.deployment, world.admin, victim)


# -- 5. tables made before locations were recorded -------------------------------------------------


def test_a_manifest_path_through_a_link_and_dot_dot_reads_no_other_table(local_world: World) -> None:
    """`ConfinedFileIO.new_input` checks the path `file_location` normalises lexically
    (`<own>/lnk/../metadata/m.avro` → `<own>/metadata/m.avro`), then pyarrow opens the path as
    written, and the kernel resolves `lnk` before `..`: with `lnk` a link to the victim's
    metadata folder (planted in the attacker's own folder) the server reads the victim's
    manifest as the attacker's. Planning with a predicate hint then prunes the victim's data
    file by its column bounds before anything is signed, so whether the attacker's query of its
    own shared table succeeds says whether the victim's rows lie in the hinted range: here,
    that the victim's one row has id 42."""
    world = local_world
    namespace = f"victims_{rand()}"
    catalog = world.admin.catalog(world.wh)
    catalog.create_namespace(namespace)
    victim = catalog.create_table(f"{namespace}.kept", schema=ROWS, properties=V2)
    victim.append(rows_table([(42, "the secret row")]))
    victim = catalog.load_table(f"{namespace}.kept")
    victim_manifest = current_manifests(victim)[0]  # named after the manifest list GetTable shows

    own = own_table(world)
    own_folder = local_path(world, own.location())
    (own_folder / "lnk").symlink_to(
        local_path(world, victim_manifest.manifest_path).parent, target_is_directory=True
    )
    fields = ("manifest_length", "partition_spec_id", "content", "sequence_number", "min_sequence_number",
              "added_snapshot_id", "added_files_count", "existing_files_count", "deleted_files_count",
              "added_rows_count", "existing_rows_count", "deleted_rows_count", "partitions")  # fmt: skip
    through = ManifestFile.from_args(
        manifest_path=f"{own.location()}/lnk/../metadata/{victim_manifest.manifest_path.rsplit('/', 1)[1]}",
        **{field: getattr(victim_manifest, field) for field in fields},
    )
    snapshot_id = new_snapshot_id()
    assert (
        world.attack(snapshot_updates(own, snapshot_id, [through], "append"), name_of(own)).status_code == 200
    )
    shared = share(world, world.wh, ATT, name_of(own))

    above_41 = hinted(world, shared, "id", "greaterThan", 41)
    above_42 = hinted(world, shared, "id", "greaterThan", 42)
    assert above_41.status_code == above_42.status_code, (
        "the attacker's query tells whether the victim's rows have id > 41 "
        f"({above_41.status_code}) or id > 42 ({above_42.status_code}): the victim's manifest was read"
    )
