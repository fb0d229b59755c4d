"""Config reads and checks settings without touching the disk; start-up makes what it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from share_store.storage.local import LocalStorage
from sharing_server.config import ServerConfig, load_config
from sharing_server.http.errors import ConfigError
from sharing_server.startup import open_services, prepare_disk, server_secret


def local_config(tmp_path: Path, **extra: str) -> ServerConfig:
    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "data-dir")} | extra
    return load_config(env=env)


def test_reading_the_configuration_writes_nothing(tmp_path: Path) -> None:
    config = local_config(tmp_path)
    assert config.resolved_store_url().endswith("data-dir/store.db")
    storage = config.make_storage(b"k" * 32)
    catalogs = config.make_catalogs()
    assert isinstance(storage, LocalStorage)
    assert "default" in catalogs.configs
    assert list(tmp_path.iterdir()) == []


def test_start_up_makes_folders_and_one_key_that_stays(tmp_path: Path) -> None:
    config = local_config(tmp_path)
    prepare_disk(config)
    assert config.data_dir.is_dir() and config.storage_root().is_dir()
    assert config.embedded_warehouse is not None and config.embedded_warehouse.is_dir()
    key = server_secret(config)
    assert len(key) == 64 and server_secret(config) == key
    assert config.key_file.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in config.data_dir.iterdir()) == ["data", "server.key"]  # no draft


def test_a_configured_key_is_used_as_given_and_no_file_is_made(tmp_path: Path) -> None:
    config = local_config(tmp_path, SHARING_SERVER_SECRET_KEY="s3cr3t")
    assert server_secret(config) == b"s3cr3t"
    assert not config.key_file.exists()


def test_services_open_the_store_storage_and_catalogs(tmp_path: Path) -> None:
    services = open_services(local_config(tmp_path))
    try:
        assert services.store.list_shares() == []
        assert services.secret == server_secret(services.config)
    finally:
        services.close()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SHARING_LIMITS_MAX_BODY_BYTES": "10"}, "max_body_bytes must be at least 1024"),
        ({"SHARING_OAUTH_ACCESS_TOKEN_LIFETIME": "60"}, "access_token_lifetime must be at least"),
        ({"SHARING_LIMITS_GLOBAL_RPS": "lots"}, "invalid [limits]/[oauth] setting"),
        ({"SHARING_SERVER_PORT": "http"}, "[server] port"),
        ({"SHARING_ADMIN_TOKEN_HASH": "abc"}, "token_hash must be the SHA-256"),
        ({"SHARING_LIMITS_BODY_TIMEOUT": "0"}, "body_timeout and stream_send_timeout must be above 0"),
        ({"SHARING_LIMITS_STREAM_SEND_TIMEOUT": "-1"}, "stream_send_timeout must be above 0"),
        ({"SHARING_LIMITS_STREAM_BUFFER_BYTES": "100"}, "stream_buffer_bytes must be at least 4096"),
        ({"SHARING_LIMITS_STREAMS_PER_TOKEN": "-1"}, "must be 0 (off) or more"),
        ({"SHARING_LIMITS_STREAMS_PER_PROCESS": "many"}, "invalid [limits]/[oauth] setting"),
        ({"SHARING_LIMITS_BODY_TIMEOUT": "nan"}, "body_timeout and stream_send_timeout must be above 0"),
        ({"SHARING_ICEBERG_EQUALITY_DELETE_BUDGET_SECONDS": "soon"}, "invalid [iceberg] equality_delete"),
        ({"SHARING_ICEBERG_EQUALITY_DELETE_BUDGET_SECONDS": "0"}, "budget_seconds must be more than 0"),
        ({"SHARING_LIMITS_MAX_HINT_NODES": "2"}, "max_hint_nodes must be at least 3"),
        ({"SHARING_LIMITS_HINT_BUDGET_MS": "-1"}, "hint_budget_ms must be 0 (no budget) or more"),
        ({"SHARING_LIMITS_HINT_BUDGET_MS": "nan"}, "hint_budget_ms must be 0 (no budget) or more"),
        ({"SHARING_CACHE_SNAPSHOT_FILES": "many"}, "invalid [cache] setting"),
        ({"SHARING_CACHE_FILES_CHECK_SECONDS": "-1"}, "cannot be negative"),
    ],
)
def test_bad_settings_are_config_errors_at_load_time(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        local_config(tmp_path, **env)
    assert message in raised.value.message


def test_options_are_made_once_per_configuration(tmp_path: Path) -> None:
    config = local_config(tmp_path, SHARING_LIMITS_GLOBAL_RPS="7")
    assert config.options is config.options
    assert config.options.global_rps == 7.0


def test_delta_format_preference_is_on_unless_turned_off(tmp_path: Path) -> None:
    path = tmp_path / "sharing.toml"
    path.write_text("[server]\nprefer_delta_format = false\n")
    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "d")}
    assert load_config(path, env=env).options.prefer_delta_format is False
    assert load_config(env=env).options.prefer_delta_format is True
    on = env | {"SHARING_SERVER_PREFER_DELTA_FORMAT": "true"}
    assert load_config(path, env=on).options.prefer_delta_format is True


def test_stream_and_body_limits_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "sharing.toml"
    path.write_text("[limits]\nstream_send_timeout = 5\nstreams_per_token = 4\nbody_timeout = 2.5\n")
    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "d"), "SHARING_LIMITS_STREAMS_PER_PROCESS": "0"}
    options = load_config(path, env=env).options
    assert (options.stream_send_timeout, options.body_timeout) == (5.0, 2.5)
    assert (options.streams_per_token, options.streams_per_process) == (4, 0)
    assert options.stream_buffer_bytes == 64 * 1024  # the default


def test_the_equality_delete_budget_comes_from_the_iceberg_section(tmp_path: Path) -> None:
    assert local_config(tmp_path).options.iceberg.equality_delete_budget_seconds == 30.0
    path = tmp_path / "server.toml"
    path.write_text("[iceberg]\nequality_delete_budget_seconds = 2.5\n")
    assert load_config(path, env={}).options.iceberg.equality_delete_budget_seconds == 2.5
    variable = {"SHARING_ICEBERG_EQUALITY_DELETE_BUDGET_SECONDS": "90"}
    assert load_config(path, env=variable).options.iceberg.equality_delete_budget_seconds == 90.0
    path.write_text("[iceberg]\nequality_delete_budget = 2.5\n")
    with pytest.raises(ConfigError, match="unknown \\[iceberg\\] settings"):
        load_config(path, env={})


def test_hint_limits_have_defaults_and_settings(tmp_path: Path) -> None:
    defaults = local_config(tmp_path).options
    assert (defaults.max_hint_nodes, defaults.hint_budget_ms) == (10_000, 50.0)
    set_ = local_config(
        tmp_path, SHARING_LIMITS_MAX_HINT_NODES="500", SHARING_LIMITS_HINT_BUDGET_MS="0"
    ).options
    assert (set_.max_hint_nodes, set_.hint_budget_ms) == (500, 0.0)


def test_cache_settings_reach_the_options(tmp_path: Path) -> None:
    defaults = local_config(tmp_path).options
    assert defaults.snapshot_cache_files == 500_000 and defaults.files_check_seconds == 5.0
    config = local_config(
        tmp_path, SHARING_CACHE_SNAPSHOT_FILES="20000", SHARING_CACHE_FILES_CHECK_SECONDS="0"
    )
    assert config.options.snapshot_cache_files == 20_000 and config.options.files_check_seconds == 0.0


def test_delta_snapshots_for_iceberg_clients_come_from_the_iceberg_section(tmp_path: Path) -> None:
    assert local_config(tmp_path).options.iceberg.delta_snapshots == 10
    assert local_config(tmp_path, SHARING_ICEBERG_DELTA_SNAPSHOTS="3").options.iceberg.delta_snapshots == 3
    with pytest.raises(ConfigError, match="delta_snapshots must be at least 1"):
        assert local_config(tmp_path, SHARING_ICEBERG_DELTA_SNAPSHOTS="0").options


def test_snapshot_warming_settings_come_from_the_cache_section(tmp_path: Path) -> None:
    defaults = local_config(tmp_path).options
    assert (defaults.warm_on_start, defaults.refresh_seconds) == (True, 1.0)
    set_ = local_config(
        tmp_path, SHARING_CACHE_WARM_ON_START="false", SHARING_CACHE_REFRESH_SECONDS="0"
    ).options
    assert (set_.warm_on_start, set_.refresh_seconds) == (False, 0.0)
    with pytest.raises(ConfigError, match="cannot be negative"):
        assert local_config(tmp_path, SHARING_CACHE_REFRESH_SECONDS="-1").options


def test_background_maintenance_is_on_by_default_and_set_in_its_section(tmp_path: Path) -> None:
    defaults = local_config(tmp_path).options.maintenance
    assert (defaults.enabled, defaults.interval_seconds, defaults.cpu_share, defaults.period_hours) == (
        True, 60.0, 0.25, 24.0)  # fmt: skip
    path = tmp_path / "sharing.toml"
    path.write_text("[maintenance]\nbackground = false\ninterval_seconds = 5\ncpu_share = 0.5\n")
    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "d"), "SHARING_MAINTENANCE_PERIOD_HOURS": "6"}
    set_ = load_config(path, env=env).options.maintenance
    assert (set_.enabled, set_.interval_seconds, set_.cpu_share, set_.period_hours) == (False, 5.0, 0.5, 6.0)
    for key, value, message in (
        ("CPU_SHARE", "2", "cpu_share must be above 0 and at most 1"),
        ("INTERVAL_SECONDS", "0", "interval_seconds must be above 0"),
        ("INTERVAL_SECONDS", "soon", "invalid \\[maintenance\\] setting"),
    ):
        with pytest.raises(ConfigError, match=message):
            assert local_config(tmp_path, **{f"SHARING_MAINTENANCE_{key}": value}).options


def test_credential_vending_settings_from_the_iceberg_section(tmp_path: Path) -> None:
    path = tmp_path / "sharing.toml"
    path.write_text('[iceberg]\ncredential_vending = "sts"\ncredential_role_arn = "arn:aws:iam::1:role/r"\n')
    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "d"), "SHARING_ICEBERG_CREDENTIAL_DURATION": "1800"}
    vending = load_config(path, env=env).options.vending
    assert (vending.mode, vending.role_arn, vending.duration, vending.sts_endpoint) == (
        "sts",
        "arn:aws:iam::1:role/r",
        1800,
        None,
    )
    assert load_config(env=env).options.vending.enabled is False  # off unless set
    for bad, message in (("SHARING_ICEBERG_CREDENTIAL_VENDING", "credential_vending must be one of"),
                         ("SHARING_ICEBERG_CREDENTIAL_DURATION", "credential_duration")):  # fmt: skip
        with pytest.raises(ConfigError) as raised:
            load_config(env=env | {bad: "60" if "DURATION" in bad else "aws"}).options  # noqa: B018
        assert message in raised.value.message


def test_max_token_lifetime_bounds_the_cli_and_is_configurable(tmp_path: Path) -> None:
    from datetime import timedelta

    from share_store.errors import AdminError
    from share_store.persistence import ShareStore, sqlite_url
    from sharing_server.cli import local_admin

    env = {"SHARING_SERVER_DATA_DIR": str(tmp_path / "d")}
    assert load_config(env=env).options.max_token_lifetime == timedelta(days=365)
    assert (
        load_config(env=env | {"SHARING_ADMIN_MAX_TOKEN_LIFETIME": "never"}).options.max_token_lifetime
        is None
    )
    short = load_config(env=env | {"SHARING_ADMIN_MAX_TOKEN_LIFETIME": "12h"})
    assert short.options.max_token_lifetime == timedelta(hours=12)
    with pytest.raises(ConfigError, match=r"invalid \[admin\] max_token_lifetime"):
        load_config(env=env | {"SHARING_ADMIN_MAX_TOKEN_LIFETIME": "forever"}).options  # noqa: B018
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    (tmp_path / "d").mkdir()  # the CLI's prepare_disk: the server key is kept there
    admin = local_admin(store, short)
    admin.create_share("s", [], check=False)
    assert admin.create_token("s", "12h", "")["expiresAt"]
    with pytest.raises(AdminError, match="longer than \\[admin\\] max_token_lifetime \\(43200s\\)"):
        admin.create_token("s", "1d", "")
    store.close()


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sharing.toml"
    path.write_text(text + f'\n[server]\ndata_dir = "{tmp_path / "data-dir"}"\n')
    return path


def test_a_legacy_catalog_block_holding_only_an_empty_catalog_url_is_no_catalog(tmp_path: Path) -> None:
    """As the documentation's multi-catalog example keeps it: alone, the embedded catalog stays."""
    config = load_config(write_toml(tmp_path, '[catalog]\ncatalog_url = ""\n'), env={})
    assert config.catalogs == {}
    assert list(config.make_catalogs().configs) == ["default"]
    beside = '[catalog]\ncatalog_url = ""\n[catalogs.wh]\ntype = "rest"\nuri = "http://127.0.0.1:9"\n'
    assert list(load_config(write_toml(tmp_path, beside), env={}).make_catalogs().configs) == ["wh"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[catalog]\ncatalog_url = "https://polaris.example.com/api/catalog"\n',
            "[catalog] catalog_url: a single unnamed catalog is not read here; write it as [catalogs.NAME]",
        ),
        ('[catalog]\ncatalog_url = ""\nwarehouse = "w"\n', "[catalog] warehouse: a single unnamed catalog"),
        ('catalog = "x"\n', "catalog: the legacy [catalog] block is a table"),
        ("[query]\ndefault_catalog = 3\n", "[query] default_catalog: must be a string"),
    ],
)
def test_a_legacy_catalog_block_with_settings_is_refused_not_lost(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(write_toml(tmp_path, text), env={})
    assert raised.value.message.startswith(message)
    assert "polaris" not in raised.value.message


def test_the_query_default_catalog_is_taken_and_ignored(tmp_path: Path) -> None:
    text = (
        '[catalogs.wh]\ntype = "rest"\nuri = "http://127.0.0.1:9"\n'
        '[query]\ndefault_catalog = "wh"   # the engine\'s default for unqualified names\n'
    )
    config = load_config(write_toml(tmp_path, text), env={})
    assert list(config.make_catalogs().configs) == ["wh"]


@pytest.mark.parametrize(("text", "minutes"), [("", 30), ("0", 0), ("1440", 1440), ('"90"', 90)])
def test_the_idempotency_key_lifetime_is_set_in_minutes_or_off(
    tmp_path: Path, text: str, minutes: int
) -> None:
    setting = f"[warehouses]\nidempotency_key_minutes = {text}\n" if text else ""
    assert load_config(write_toml(tmp_path, setting), env={}).options.idempotency_key_minutes == minutes


@pytest.mark.parametrize("text", ["-1", "10081", '"PT30M"', "true", "1.5"])
def test_an_idempotency_key_lifetime_out_of_range_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="idempotency_key_minutes"):
        _ = load_config(
            write_toml(tmp_path, f"[warehouses]\nidempotency_key_minutes = {text}\n"), env={}
        ).options
