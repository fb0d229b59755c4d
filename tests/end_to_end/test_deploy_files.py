"""The deployment example (deploy/, Dockerfile) holds together: no Docker needed, no network.

Each check is a fact whose breaking would only show when someone runs `docker compose up`:
a dependency without a health check, replicas with different secrets, a SHARING_* variable
the server does not know, a ${VAR} missing from .env.example, a config file not mounted.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from sharing_server import config as server_config
from sharing_server import config_sections

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error} (Compose interpolation).
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|HASH|_KEY$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict[str, dict]:
    return compose["services"]


@pytest.fixture(scope="module")
def replicas(services: dict[str, dict]) -> dict[str, dict]:
    """The services built from the project's Dockerfile."""
    return {name: svc for name, svc in services.items() if "build" in svc}


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example: not KEY=VALUE: {line!r}"
            values[key.strip()] = value.strip()
    return values


def known_settings() -> dict[str, set[str]]:
    """Section -> keys the server reads from sharing.toml and SHARING_<SECTION>_<KEY>.

    Only what the server's config module knows: a section or key it dropped makes
    the deployment files' use of it fail here.
    """
    sections = {
        "server": set(config_sections.SERVER_KEYS),
        "store": {"url"},
        "storage": set(config_sections.STORAGE_KEYS),
    }
    for section, keys in config_sections.SECTION_KEYS.items():
        sections[section] = set(keys)
    return sections


def known_env_names() -> set[str]:
    return {
        f"{config_sections.ENV_PREFIX}{section.upper()}_{key.upper()}"
        for section, keys in known_settings().items()
        for key in keys
    }


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def interpolate(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        default = match.group(3) if (match.group(2) or "").endswith("-") else ""
        return values.get(match.group(1)) or default or ""

    return INTERPOLATION.sub(value, text)


def strings(node: object) -> list[str]:
    """Every string value in a parsed YAML document (what Compose interpolates; not comments)."""
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in strings(key) + strings(value)]
    if isinstance(node, list):
        return [s for item in node for s in strings(item)]
    return [node] if isinstance(node, str) else []


def networks(service: dict) -> set[str]:
    nets = service.get("networks", ["default"])
    return set(nets) if isinstance(nets, list) else set(nets.keys())


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def has_healthcheck(service: dict) -> bool:
    check = service.get("healthcheck")
    if check is not None:
        return not check.get("disable", False) and check.get("test") not in (None, ["NONE"])
    # A service built from our Dockerfile inherits its HEALTHCHECK.
    return "build" in service and any(op == "HEALTHCHECK" for op, _ in dockerfile_instructions())


def test_two_replicas_are_built_from_the_dockerfile(replicas: dict[str, dict]) -> None:
    assert len(replicas) >= 2
    for name, svc in replicas.items():
        build = svc["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT, name
        assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name


def test_replica_dependencies_exist_and_are_healthy(services: dict, replicas: dict) -> None:
    for name, svc in replicas.items():
        depends = svc.get("depends_on")
        assert isinstance(depends, dict) and depends, f"{name}: depends_on with conditions"
        for dep, spec in depends.items():
            assert dep in services, f"{name} depends on missing service {dep}"
            assert spec.get("condition") == "service_healthy", f"{name} -> {dep}"
            assert has_healthcheck(services[dep]), f"{dep} has no healthcheck"


def test_every_healthy_condition_has_a_healthcheck(services: dict) -> None:
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on missing service {dep}"
            if isinstance(spec, dict) and spec.get("condition") == "service_healthy":
                assert has_healthcheck(services[dep]), f"{name} waits for {dep}, which has no healthcheck"


def test_services_share_a_network_with_what_they_reach(services: dict, replicas: dict) -> None:
    for name, svc in services.items():
        for dep in svc.get("depends_on") or {}:
            assert networks(svc) & networks(services[dep]), f"{name} cannot reach {dep}"
    for name in replicas:
        assert networks(services["caddy"]) & networks(services[name]), f"caddy cannot reach {name}"


def test_replicas_share_secret_key_and_store(replicas: dict[str, dict], services: dict) -> None:
    envs = [environment(svc) for svc in replicas.values()]
    for key in ("SHARING_SERVER_SECRET_KEY", "SHARING_STORE_URL"):
        values = {env.get(key) for env in envs}
        assert len(values) == 1 and None not in values, f"replicas differ on {key}: {values}"
        (value,) = values
        assert INTERPOLATION.search(value), f"{key} must come from .env, not be written in compose.yaml"
    sharing = {key: value for key, value in envs[0].items() if key.startswith("SHARING_")}
    for env in envs:
        assert {k: v for k, v in env.items() if k.startswith("SHARING_")} == sharing, "replicas differ"
    # The store URL points at the compose PostgreSQL, with its user, password and database.
    url = urlsplit(interpolate(envs[0]["SHARING_STORE_URL"], {"POSTGRES_PASSWORD": "pw"}))
    assert url.scheme == "postgresql+psycopg"
    assert url.hostname in services and url.port == 5432
    pg = environment(services[url.hostname])
    assert url.username == pg["POSTGRES_USER"] and url.path == "/" + pg["POSTGRES_DB"]
    password_vars = {m.group(1) for m in INTERPOLATION.finditer(envs[0]["SHARING_STORE_URL"])}
    assert password_vars == {m.group(1) for m in INTERPOLATION.finditer(pg["POSTGRES_PASSWORD"])}


def test_sharing_variables_are_settings_the_server_knows(services: dict, env_example: dict) -> None:
    known = known_env_names()
    used = {key for svc in services.values() for key in environment(svc) if key.startswith("SHARING_")}
    used |= {key for key in env_example if key.startswith("SHARING_")}
    assert used, "compose.yaml passes no SHARING_* settings"
    assert used <= known, f"unknown settings: {sorted(used - known)}"


def test_sharing_toml_keys_are_known_and_hold_no_secrets() -> None:
    raw = tomllib.loads((DEPLOY / "sharing.toml").read_text())
    known = known_settings()
    for section, values in raw.items():
        if section == "catalogs":
            continue
        assert section in known, f"unknown section [{section}]"
        unknown = set(values) - known[section]
        assert not unknown, f"[{section}] unknown keys: {sorted(unknown)}"
    secrets = {("server", "secret_key"), ("store", "url"), ("admin", "token_hash")}
    secrets |= {("storage", key) for key in ("access_key", "secret_key", "session_token")}
    present = {(section, key) for section, values in raw.items() for key in values}
    assert not (present & secrets), f"secrets belong in .env: {sorted(present & secrets)}"


def test_replica_config_loads(replicas: dict[str, dict], env_example: dict) -> None:
    """sharing.toml plus a replica's environment, with .env filled in, is a config the server accepts."""
    filled = {key: value or f"test-{key.lower()}" for key, value in env_example.items()}
    filled["SHARING_ADMIN_TOKEN_HASH"] = "0" * 64
    replica = next(iter(replicas.values()))
    env = {key: interpolate(value, filled) for key, value in environment(replica).items()}
    config = server_config.load_config(DEPLOY / "sharing.toml", env=env)
    assert config.store_url and config.store_url.startswith("postgresql+psycopg://")
    assert config.secret_key == filled["SHARING_SERVER_SECRET_KEY"]
    assert config.public_url == f"https://{filled['PUBLIC_HOST']}"
    assert config.storage["type"] == "s3"
    assert config.storage["public_endpoint"] == f"https://{filled['S3_PUBLIC_HOST']}"
    assert config.storage["access_key"] and config.storage["secret_key"]
    # The S3 endpoint the replicas read from is the compose SeaweedFS service.
    assert urlsplit(config.storage["endpoint"]).hostname in {"seaweedfs"}


def test_interpolated_variables_match_env_example(compose: dict, env_example: dict) -> None:
    referenced = {m.group(1) for text in strings(compose) for m in INTERPOLATION.finditer(text)}
    assert referenced - set(env_example) == set(), "used in compose.yaml, missing from .env.example"
    assert set(env_example) - referenced == set(), "in .env.example, unused by compose.yaml"


def test_env_example_holds_no_real_secrets(env_example: dict) -> None:
    placeholder = re.compile(r"example|change|placeholder|your|<|\.\.\.|…", re.IGNORECASE)
    for key, value in env_example.items():
        if SECRET_NAME.search(key) and value:
            assert placeholder.search(value), f"{key} looks like a real secret"
        # Nothing long and random-looking, whatever its name.
        assert not re.fullmatch(r"[A-Za-z0-9+/_=-]{20,}", value), f"{key} looks like a real secret"


def test_mounted_files_exist(services: dict) -> None:
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"


def test_seaweedfs_gets_the_keys_its_identities_file_names(services: dict) -> None:
    svc = services["seaweedfs"]
    config_flag = next(arg for arg in svc["command"] if arg.startswith("-s3.config="))
    target = config_flag.split("=", 1)[1]
    mounts = dict(reversed(v.split(":")[:2]) for v in svc["volumes"] if v.startswith("."))
    identities = json.loads((DEPLOY / mounts[target]).read_text())
    refs = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", json.dumps(identities)))
    assert refs and refs <= set(environment(svc)), f"not passed to seaweedfs: {refs - set(environment(svc))}"


def test_load_balancer_reaches_every_replica(replicas: dict, services: dict) -> None:
    caddyfile = (DEPLOY / "Caddyfile").read_text()
    upstreams = {
        target
        for line in caddyfile.splitlines()
        if line.strip().startswith("reverse_proxy")
        for target in line.split()[1:]
        if re.fullmatch(r"[\w.-]+:\d+", target)
    }
    assert {f"{name}:8080" for name in replicas} <= upstreams
    assert all(target.split(":")[0] in services for target in upstreams), upstreams
    assert "health_uri /healthz" in caddyfile


def test_images_are_pinned(services: dict) -> None:
    for name, svc in services.items():
        if "build" not in svc:
            image = svc["image"]
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"


def test_dockerfile_is_multistage_nonroot_with_healthcheck() -> None:
    instructions = dockerfile_instructions()
    froms = [i for i, (op, _) in enumerate(instructions) if op == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    final = instructions[froms[-1] :]
    users = [arg for op, arg in final if op == "USER"]
    assert users, "the runtime stage must set USER"
    assert users[-1].split(":")[0] not in ("root", "0"), users[-1]
    checks = [arg for op, arg in final if op == "HEALTHCHECK"]
    assert checks and "/healthz" in checks[-1]
    copies = [arg for op, arg in instructions if op in ("COPY", "ADD")]
    assert not any(re.match(r"(--\S+\s+)*\.\s", arg) for arg in copies), "COPY . would ship the context"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "tests" in ignored and ".env" in ignored
