"""What the Spark maintenance job calls for a configuration, and what its launcher refuses: no Spark.

`tests/end_to_end/test_spark_maintenance.py` runs the job; here are the cases that one run does
not reach (a kind disabled, a sort strategy without a sort order, format 1, an object-store
location, bad table properties, names that need quoting, a missing server or token).
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from share_store.errors import AdminError
from sharing_server.admin.catalog import spark_maintenance
from sharing_server.spark_jobs import maintenance as job

NOW = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


def configuration(status: str = "enabled", **settings: Any) -> dict[str, Any]:
    defaults = {
        job.COMPACTION: {"targetFileSizeMB": 512, "strategy": "auto"},
        job.SNAPSHOT_MANAGEMENT: {"minSnapshotsToKeep": 1, "maxSnapshotAgeHours": 120},
        job.UNREFERENCED_FILE_REMOVAL: {"unreferencedDays": 3, "nonCurrentDays": 10},
    }
    return {
        kind: {"status": status, "settings": {kind: {**values, **settings.get(kind, {})}}}
        for kind, values in defaults.items()
    }


def metadata(
    sorted_by: str | None = None, version: int = 2, location: str = "file:///w/t", **properties: str
):
    orders = [{"order-id": 0, "fields": []}]
    if sorted_by:
        orders.append({"order-id": 1, "fields": [{"source-id": 1, "transform": "identity"}]})
    return {
        "format-version": version,
        "location": location,
        "sort-orders": orders,
        "default-sort-order-id": 1 if sorted_by else 0,
        "properties": properties,
    }


def sql(procedure: str, config: dict[str, Any], meta: dict[str, Any], table: str = "`db`.`t`") -> str | None:
    return job.call_for(procedure, table, config, meta, NOW).sql


def test_the_compaction_sorts_where_the_table_has_a_sort_order_and_the_strategy_lets_it() -> None:
    assert "strategy => 'sort'" in str(sql("rewrite_data_files", configuration(), metadata("id")))
    assert "strategy => 'binpack'" in str(sql("rewrite_data_files", configuration(), metadata()))
    packed = configuration(icebergCompaction={"strategy": "binpack"})
    assert "strategy => 'binpack'" in str(sql("rewrite_data_files", packed, metadata("id")))
    sort = configuration(icebergCompaction={"strategy": "sort"})
    call = job.call_for("rewrite_data_files", "`db`.`t`", sort, metadata(), NOW)
    assert (call.sql, call.why) == (None, "strategy 'sort' but the table has no sort order")


def test_the_compaction_options() -> None:
    got = str(
        sql("rewrite_data_files", configuration(icebergCompaction={"targetFileSizeMB": 64}), metadata())
    )
    assert got == (
        "CALL sharing.system.rewrite_data_files(table => '`db`.`t`', strategy => 'binpack', options => map("
        "'target-file-size-bytes', '67108864', 'min-input-files', '2', 'delete-file-threshold', '1', "
        "'partial-progress.enabled', 'true', 'remove-dangling-deletes', 'true'))"
    )
    # Format 1 has no delete files to dangle.
    assert "remove-dangling-deletes" not in str(
        sql("rewrite_data_files", configuration(), metadata(version=1))
    )


@pytest.mark.parametrize("procedure", job.PROCEDURES)
def test_a_disabled_kind_is_skipped(procedure: str) -> None:
    call = job.call_for(procedure, "`db`.`t`", configuration("disabled"), metadata(), NOW)
    assert call.sql is None and call.why == f"{job.KIND[procedure]} is disabled"


def test_the_expiry_takes_the_settings_and_the_tables_properties_over_them() -> None:
    settings = configuration(icebergSnapshotManagement={"minSnapshotsToKeep": 4, "maxSnapshotAgeHours": 2})
    assert sql("expire_snapshots", settings, metadata()) == (
        "CALL sharing.system.expire_snapshots(table => '`db`.`t`', "
        "older_than => TIMESTAMP '2023-11-14 20:13:20.000Z', retain_last => 4, stream_results => true)"
    )
    owned = metadata(**{job.MAX_SNAPSHOT_AGE_MS: "60000", job.MIN_SNAPSHOTS_TO_KEEP: "7"})
    call = job.call_for("expire_snapshots", "`db`.`t`", settings, owned, NOW)
    assert "TIMESTAMP '2023-11-14 22:12:20.000Z', retain_last => 7" in str(call.sql)
    assert call.why.endswith(f"({job.MAX_SNAPSHOT_AGE_MS}), retain last 7 ({job.MIN_SNAPSHOTS_TO_KEEP})")
    # Values Java would not parse are not the table's: the settings stand.
    bad = metadata(**{job.MAX_SNAPSHOT_AGE_MS: " 60000", job.MIN_SNAPSHOTS_TO_KEEP: "0"})
    assert "20:13:20.000Z', retain_last => 4" in str(sql("expire_snapshots", settings, bad))


def test_orphans_wait_for_both_periods_and_an_object_store_is_listed_through_the_tables_io() -> None:
    local = str(sql("remove_orphan_files", configuration(), metadata()))
    assert local == (
        "CALL sharing.system.remove_orphan_files(table => '`db`.`t`', "
        "older_than => TIMESTAMP '2023-11-01 22:13:20.000Z')"
    )
    s3 = str(sql("remove_orphan_files", configuration(), metadata(location="s3://bucket/db/t")))
    assert s3.endswith(", prefix_listing => true)")


def test_names_are_quoted_for_spark() -> None:
    table = job.identifier("we`ird", "it's")
    assert table == "`we``ird`.`it's`"
    assert "table => '`we``ird`.`it\\'s`'" in str(sql("expire_snapshots", configuration(), metadata(), table))
    assert job.split_table("sales.eu.orders") == (("sales", "eu"), "orders")
    with pytest.raises(job.JobError):
        job.split_table("orders")


def launcher(*options: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    spark_maintenance.add_arguments(parser)
    args = parser.parse_args(options)
    args.warehouse, args.namespace, args.table = "w", "db", "t"
    return args


def test_the_launcher_refuses_unknown_procedures_and_wants_a_server_and_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SystemExit):
        launcher("--procedures", "rewrite_data_files,vacuum")
    for name in ("SHARING_ADMIN_URL", "SHARING_ADMIN_TOKEN", job.TOKEN_VARIABLE, job.CREDENTIAL_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(AdminError, match="--server URL"):
        spark_maintenance.run(launcher("--dry-run"))
    with pytest.raises(AdminError, match="expected http"):
        spark_maintenance.run(launcher("--server", "sharing.example.com", "--dry-run"))
    with pytest.raises(AdminError, match="needs a token"):
        spark_maintenance.run(launcher("--server", "http://127.0.0.1:9"))
    with pytest.raises(AdminError, match="cannot run /nowhere/spark-submit"):
        spark_maintenance.run(
            launcher(
                "--server", "http://127.0.0.1:9", "--token", "t", "--spark-submit", "/nowhere/spark-submit"
            )
        )


def test_the_job_gets_one_secret_in_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(job.TOKEN_VARIABLE, "stale")
    monkeypatch.setenv("SHARING_ADMIN_TOKEN", "dsa_admin")
    environment = spark_maintenance.job_environment(launcher())
    assert environment[job.TOKEN_VARIABLE] == "dsa_admin" and job.CREDENTIAL_VARIABLE not in environment
    keyed = spark_maintenance.job_environment(launcher("--credential", "KEY:SECRET"))
    assert keyed[job.CREDENTIAL_VARIABLE] == "KEY:SECRET" and job.TOKEN_VARIABLE not in keyed
    given = spark_maintenance.job_environment(launcher("--token", "dsa_given", "--credential", "KEY:SECRET"))
    assert given[job.TOKEN_VARIABLE] == "dsa_given" and job.CREDENTIAL_VARIABLE not in given


def test_a_given_spark_submit_runs_its_own_spark_whatever_spark_home_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    from sharing_server.admin.catalog import spark_maintenance

    monkeypatch.setenv("SPARK_HOME", "/elsewhere/pyspark-4")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/elsewhere/bin/python")
    parser = argparse.ArgumentParser()
    spark_maintenance.add_arguments(parser)
    submitted = parser.parse_args(["--token", "t", "--spark-submit", "/opt/spark/bin/spark-submit"])
    assert "SPARK_HOME" not in spark_maintenance.job_environment(submitted)
    given = parser.parse_args(["--token", "t", "--spark-submit", "/opt/spark/bin/spark-submit",
                               "--python", "/opt/venv/bin/python"])  # fmt: skip
    driven = spark_maintenance.job_environment(given)
    assert driven["PYSPARK_DRIVER_PYTHON"] == driven["PYSPARK_PYTHON"] == "/opt/venv/bin/python"
    local = parser.parse_args(["--token", "t"])
    assert spark_maintenance.job_environment(local)["SPARK_HOME"] == "/elsewhere/pyspark-4"
