"""One token, every share, at `/iceberg` (issue 51, OpenSharing's Iceberg REST form).

A named recipient's token opens every share granted to it. `GET /iceberg/v1/config?warehouse=SHARE`
answers the prefix `shares/SHARE`, and every later call goes under `/iceberg/v1/shares/SHARE/...`:
each granted share is a warehouse of its own. The provider sets it up through the CLI against a
running server on SeaweedFS (vending on, as `[iceberg] credential_vending = "sts"`): two shares of
Delta tables on S3, one of them restricted by `CURRENT_RECIPIENT('nation')`, two recipients with
different properties, and a third share granted to neither.

Real clients: pyiceberg reading two shares with one token (remote signing), DuckDB attaching both
(vended keys), Spark 3.5's Iceberg REST client listing and loading both. Hostile cases: a share not
granted, unknown, or badly named (`/`, `..`, `%2F`) as the warehouse or in the prefix path; a
share's own token asking another share's warehouse; prefixes mixed between configuration and later
calls; one recipient having the other's derived files signed; a grant removed while its files are
loaded.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import SignError

from share_store.authentication.tokens import hash_secret
from sharing_server.cli import main
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, empty_prefix, ensure_bucket, upload_tree
from tests.conftest import ADMIN_TOKEN, SPARK_ICEBERG_PYTHON, Deployment, deploy
from tests.end_to_end.test_warehouse_engines import duckdb_connection

BUCKET = "onetoken"
NATIONS = ("JAPAN", "PERU", "CHILE")
SIGNED = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
SPARK_JOB = Path(__file__).resolve().parents[1] / "iceberg_one_token_spark_job.py"


def customers() -> pd.DataFrame:
    ids = list(range(30))
    return pd.DataFrame(
        {
            "custkey": ids,
            "name": [f"customer-{i}" for i in ids],
            "nation": [NATIONS[i % 3] for i in ids],
            "acctbal": [float(i * 10) for i in ids],
        }
    )


def orders() -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(12)), "amount": [float(i) * 1.5 for i in range(12)]})


def cli(deployment: Deployment, *args: str) -> int:
    return main(["--server", deployment.server.url, "--admin-token", ADMIN_TOKEN, *args])


def recipient_token(deployment: Deployment, name: str, tmp: Path) -> str:
    profile = tmp / f"{name}-{uuid.uuid4().hex[:6]}.share"
    assert (
        cli(deployment, "recipient", "token", "create", name, "--expires", "1d", "--profile", str(profile))
        == 0
    )
    return str(json.loads(profile.read_text())["bearerToken"])


def share_token(deployment: Deployment, share: str, tmp: Path) -> str:
    profile = tmp / f"{share}-{uuid.uuid4().hex[:6]}.share"
    assert cli(deployment, "token", "create", share, "--expires", "1d", "--profile", str(profile)) == 0
    return str(json.loads(profile.read_text())["bearerToken"])


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[dict[str, Any]]:
    """Shares `north` (customers, restricted to the recipient's nation), `south` (orders) and
    `vault` (orders again, granted to no one); recipients `acme` (JAPAN: north and south) and
    `zeta` (PERU: north only), each with a token made by the CLI."""
    tmp = tmp_path_factory.mktemp("one-token")
    env = {
        "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
    }
    deployment = deploy(tmp, seaweed.storage_config(path_style="true"), env=env)
    client = seaweed.client()
    ensure_bucket(client, BUCKET)  # made again where another module imports this fixture
    for name, frame in (("customers", customers()), ("orders", orders())):
        write_deltalake(str(tmp / name), frame)
        empty_prefix(client, BUCKET, f"{name}/")  # the table holds only this run's files
        upload_tree(client, tmp / name, BUCKET, name)
    assert cli(deployment, "share", "create", "north", "sales", f"customers:delta:{BUCKET}:customers") == 0
    where = "nation = CURRENT_RECIPIENT('nation')"
    assert cli(deployment, "share", "restrict", "north", "sales/customers", "--where", where) == 0
    assert cli(deployment, "share", "create", "south", "ops", f"orders:delta:{BUCKET}:orders") == 0
    assert cli(deployment, "share", "create", "vault", "ops", f"orders:delta:{BUCKET}:orders") == 0
    for name, nation, shares in (("acme", "JAPAN", ["north", "south"]), ("zeta", "PERU", ["north"])):
        assert cli(deployment, "recipient", "create", name, "--property", f"nation={nation}") == 0
        for share in shares:
            assert cli(deployment, "recipient", "grant", name, share) == 0
    tokens = {name: recipient_token(deployment, name, tmp) for name in ("acme", "zeta")}
    tokens["north-own"] = share_token(deployment, "north", tmp)
    yield {"deployment": deployment, "tokens": tokens, "seaweed": seaweed, "tmp": tmp}
    deployment.server.stop()
    deployment.store.close()


def root(provider: dict[str, Any]) -> str:
    return str(provider["deployment"].server.url) + "/iceberg"


def get(provider: dict[str, Any], path: str, token: str, **params: str) -> httpx.Response:
    return httpx.get(
        root(provider) + path, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def refusal(answer: httpx.Response, status: int) -> dict[str, Any]:
    """The Iceberg error model's body of a refusal with `status`."""
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == status, error
    return dict(error)


def catalog(provider: dict[str, Any], token: str, share: str, **properties: str) -> RestCatalog:
    return RestCatalog(
        f"{share}-{uuid.uuid4().hex[:6]}",
        **{"uri": root(provider), "token": token, "warehouse": share} | properties,
    )


def sign(provider: dict[str, Any], token: str, share: str | None, location: str) -> httpx.Response:
    """Ask the signer of `share` (the share-named one; None: the per-share one) to sign a GET."""
    bucket, _, key = location.removeprefix("s3://").partition("/")
    uri = f"{provider['seaweed'].endpoint}/{bucket}/{key}"
    path = f"/v1/shares/{share}/aws/s3/sign" if share else "/v1/aws/s3/sign"
    return httpx.post(
        root(provider) + path,
        json={"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def data_files(table: Any) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


# -- the configuration ---------------------------------------------------------------------------


def test_config_names_each_granted_share_as_its_own_prefix(provider: dict[str, Any]) -> None:
    acme = provider["tokens"]["acme"]
    for share in ("north", "south"):
        answer = get(provider, "/v1/config", acme, warehouse=share)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["defaults"] == {}
        assert body["overrides"] == {"prefix": f"shares/{share}", "namespace-separator": "%1F"}
        assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics" in body["endpoints"]
        assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials" in body["endpoints"]
    same = get(provider, "/v1/shares/south/config", acme)
    assert same.json()["overrides"] == {"prefix": "shares/south", "namespace-separator": "%1F"}


def test_a_share_not_granted_answers_as_a_share_that_does_not_exist(provider: dict[str, Any]) -> None:
    zeta = provider["tokens"]["zeta"]
    # `south` and `vault` exist, not granted to zeta; `nowhere` does not exist. Same answer but the name.
    answers = {name: refusal(get(provider, "/v1/config", zeta, warehouse=name), 404) for name in
               ("south", "vault", "nowhere")}  # fmt: skip
    shapes = {(e["type"], e["message"].replace(name, "NAME")) for name, e in answers.items()}
    assert len(shapes) == 1, answers
    forged = ("a/b", "..", "../south", "north/../south", "south%2F", "%2Fsouth", "", " south")
    forged += ("north#", "north?x=1", "north%23", "north\x00", "NORTH/..", "north ", "vault#north")
    for name in forged:
        if name:
            refusal(get(provider, "/v1/config", zeta, warehouse=name), 404)
    # No warehouse: a recipient's token must name one.
    error = refusal(get(provider, "/v1/config", zeta), 403)
    assert "one share per token" in error["message"] and "warehouse" in error["message"]
    assert refusal(get(provider, "/v1/config", zeta, warehouse=""), 403) == error


def test_a_shares_own_token_keeps_its_form_and_opens_no_other_share(provider: dict[str, Any]) -> None:
    own = provider["tokens"]["north-own"]
    unchanged = get(provider, "/v1/config", own).json()
    assert (
        unchanged["overrides"] == {"namespace-separator": "%1F"}
        and get(provider, "/v1/config", own, warehouse="north").json() == unchanged
    )
    assert get(provider, "/v1/namespaces", own).json() == {"namespaces": [["sales"]]}
    # Its own share in another case is still its own; a name that only starts like it is another.
    assert get(provider, "/v1/config", own, warehouse="NORTH").json() == unchanged
    for forged in ("north#", "north?warehouse=south", "north/../south", "north%2F", "north ", "south#north"):
        refusal(get(provider, "/v1/config", own, warehouse=forged), 404)
    other = refusal(get(provider, "/v1/config", own, warehouse="south"), 404)
    missing = refusal(get(provider, "/v1/config", own, warehouse="nowhere"), 404)
    assert other["message"].replace("south", "X") == missing["message"].replace("nowhere", "X")
    for path in ("/v1/shares/south/namespaces", "/v1/shares/south/namespaces/ops/tables/orders"):
        refusal(get(provider, path, own), 404)
    # Its own share under the share-named form: the same namespaces.
    assert get(provider, "/v1/shares/north/namespaces", own).json() == {"namespaces": [["sales"]]}


# -- prefixes mixed, paths forged ------------------------------------------------------------------


def test_a_prefix_of_a_share_not_granted_is_refused_on_every_endpoint(provider: dict[str, Any]) -> None:
    zeta = provider["tokens"]["zeta"]
    assert get(provider, "/v1/config", zeta, warehouse="north").status_code == 200
    # Configured for north, then asking under south (not granted) and vault (granted to no one).
    for share in ("south", "vault", "nowhere"):
        for path in ("namespaces", "namespaces/ops", "namespaces/ops/tables", "namespaces/ops/tables/orders",
                     "namespaces/ops/tables/orders/credentials"):  # fmt: skip
            error = refusal(get(provider, f"/v1/shares/{share}/{path}", zeta), 404)
            assert f"share '{share}' not found" in error["message"]
        head = httpx.head(f"{root(provider)}/v1/shares/{share}/namespaces/ops/tables/orders",
                          headers={"Authorization": f"Bearer {zeta}"})  # fmt: skip
        assert head.status_code == 404
        metrics = httpx.post(
            f"{root(provider)}/v1/shares/{share}/namespaces/ops/tables/orders/metrics",
            json={"report-type": "scan-report"},
            headers={"Authorization": f"Bearer {zeta}"},
        )
        refusal(metrics, 404)
        refusal(sign(provider, zeta, share, f"s3://{BUCKET}/orders/anything.parquet"), 403)
    # Paths that try to leave the share: never a 200, never a 500.
    forged = (
        "/v1/shares/north/../south/namespaces",
        "/v1/shares/..%2Fsouth/namespaces",
        "/v1/shares/north%2F..%2Fsouth/namespaces",
        "/v1/shares/south%2F/namespaces",
        "/v1/shares//namespaces",
        "/v1/shares/north/namespaces/..%2F..%2Fsouth%2Fnamespaces",
    )
    for path in forged:
        answer = httpx.get(root(provider) + path, headers={"Authorization": f"Bearer {zeta}"})
        assert answer.status_code in (400, 403, 404), (path, answer.text)
        assert "ops" not in answer.text, (path, answer.text)
    # The URLs that name no share: still refused to a recipient's token, with the way out.
    error = refusal(get(provider, "/v1/namespaces", zeta), 403)
    assert "one share per token" in error["message"]


def test_metrics_reports_are_taken_for_a_granted_table(provider: dict[str, Any]) -> None:
    acme = provider["tokens"]["acme"]
    url = f"{root(provider)}/v1/shares/south/namespaces/ops/tables/orders/metrics"
    auth = {"Authorization": f"Bearer {acme}"}
    report = {"report-type": "scan-report", "table-name": "ops.orders", "snapshot-id": 1, "metrics": {}}
    assert httpx.post(url, json=report, headers=auth).status_code == 204
    for bad in (b"{not json", b"[]", b'{"report-type": 7}', b""):
        refusal(httpx.post(url, content=bad, headers=auth), 400)
    refusal(httpx.post(url.replace("orders/metrics", "nope/metrics"), json=report, headers=auth), 404)


# -- real clients ---------------------------------------------------------------------------------


def test_pyiceberg_reads_two_shares_with_one_token_each_for_its_recipient(provider: dict[str, Any]) -> None:
    acme, zeta = provider["tokens"]["acme"], provider["tokens"]["zeta"]
    north = catalog(provider, acme, "north", **SIGNED)
    south = catalog(provider, acme, "south", **SIGNED)
    assert north.list_namespaces() == [("sales",)] and south.list_namespaces() == [("ops",)]
    assert north.list_tables("sales") == [("sales", "customers")]
    assert south.list_tables("ops") == [("ops", "orders")]
    japan = north.load_table("sales.customers").scan().to_pandas()
    assert len(japan) == 10 and set(japan.nation) == {"JAPAN"}
    got = south.load_table("ops.orders").scan().to_pandas().sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, orders(), check_dtype=False)
    peru = catalog(provider, zeta, "north", **SIGNED).load_table("sales.customers").scan().to_pandas()
    assert len(peru) == 10 and set(peru.nation) == {"PERU"}
    with pytest.raises(Exception, match="not found"):
        catalog(provider, zeta, "south")


def test_one_recipient_never_gets_anothers_derived_files_signed(provider: dict[str, Any]) -> None:
    """The attack: acme loads north's restricted table (its files are derived for JAPAN), then zeta,
    whose filter derives other files, asks north's signer for acme's files, right after acme's
    grant was kept, and the other way round."""
    acme, zeta = provider["tokens"]["acme"], provider["tokens"]["zeta"]
    acme_files = data_files(catalog(provider, acme, "north", **SIGNED).load_table("sales.customers"))
    zeta_files = data_files(catalog(provider, zeta, "north", **SIGNED).load_table("sales.customers"))
    assert acme_files and zeta_files and not set(acme_files) & set(zeta_files)
    # Zeta's grant is the one kept last: acme asks for zeta's files first.
    for location in zeta_files:
        refusal(sign(provider, acme, "north", location), 403)
    for location in acme_files:
        assert sign(provider, acme, "north", location).status_code == 200
        refusal(sign(provider, zeta, "north", location), 403)
    for location in zeta_files:
        assert sign(provider, zeta, "north", location).status_code == 200
        refusal(sign(provider, acme, "north", location), 403)
    # Nor through a share the file is not of, nor the per-share signer.
    refusal(sign(provider, acme, "south", acme_files[0]), 403)
    refusal(sign(provider, acme, None, acme_files[0]), 403)
    # The share's own token has no recipient: the filter naming a property is refused, and so
    # are the recipients' files.
    refusal(sign(provider, provider["tokens"]["north-own"], None, acme_files[0]), 403)


def test_a_grant_removed_is_refused_at_once_signatures_of_loaded_files_too(provider: dict[str, Any]) -> None:
    deployment, tmp = provider["deployment"], provider["tmp"]
    assert cli(deployment, "recipient", "create", "brief") == 0
    assert cli(deployment, "recipient", "grant", "brief", "south") == 0
    token = recipient_token(deployment, "brief", tmp)
    table = catalog(provider, token, "south", **SIGNED).load_table("ops.orders")
    files = data_files(table)
    assert sign(provider, token, "south", files[0]).status_code == 200
    assert cli(deployment, "recipient", "revoke-share", "brief", "south") == 0
    refusal(sign(provider, token, "south", files[0]), 403)
    refusal(get(provider, "/v1/shares/south/namespaces/ops/tables/orders", token), 404)
    refusal(get(provider, "/v1/config", token, warehouse="south"), 404)
    with pytest.raises(SignError, match="403"):
        table.scan().to_arrow()  # the engine that had loaded it reads nothing more


def test_duckdb_attaches_two_shares_with_one_token(provider: dict[str, Any]) -> None:
    connection = duckdb_connection()
    try:
        connection.execute(f"CREATE SECRET acme (TYPE iceberg, TOKEN '{provider['tokens']['acme']}')")
        for share in ("north", "south"):
            connection.execute(
                f"ATTACH '{share}' AS {share} (TYPE iceberg, ENDPOINT '{root(provider)}', SECRET acme, "
                "ACCESS_DELEGATION_MODE 'vended_credentials')"
            )
        japan = connection.execute("SELECT * FROM north.sales.customers").fetchdf()
        assert len(japan) == 10 and set(japan.nation) == {"JAPAN"}
        got = connection.execute("SELECT * FROM south.ops.orders ORDER BY id").fetchdf()
        pd.testing.assert_frame_equal(got, orders(), check_dtype=False)
        with pytest.raises(Exception, match=r"not found|404"):
            connection.execute(
                f"ATTACH 'vault' AS vault (TYPE iceberg, ENDPOINT '{root(provider)}', SECRET acme)"
            )
    finally:
        connection.close()


def test_spark_lists_and_loads_two_shares_with_one_token(provider: dict[str, Any]) -> None:
    assert SPARK_ICEBERG_PYTHON.exists(), "the Spark 3.5 + Iceberg environment is missing: make spark-iceberg"
    config = {"uri": root(provider), "token": provider["tokens"]["acme"], "shares": ["north", "south"]}
    done = subprocess.run(
        [str(SPARK_ICEBERG_PYTHON), str(SPARK_JOB), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("@@SEEN "))
    seen = json.loads(line.removeprefix("@@SEEN "))
    assert seen == {
        "north": {
            "namespaces": ["sales"],
            "tables": {"sales.customers": ["custkey", "name", "nation", "acctbal"]},
        },
        "south": {"namespaces": ["ops"], "tables": {"ops.orders": ["id", "amount"]}},
    }


# -- freshness (issue 52) ------------------------------------------------------------------------


def load(provider: dict[str, Any], token: str, path: str, **headers: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **headers}
    return httpx.get(root(provider) + path, headers=headers, timeout=60)


def test_loads_are_tagged_per_recipient_answer_304_and_vended_loads_are_untagged(
    provider: dict[str, Any],
) -> None:
    """A restricted table's metadata is each recipient's own: so is its tag; a tag answers 304 only
    to the loads it was given for; an answer with vended keys has no tag and never answers 304."""
    tokens, path = provider["tokens"], "/v1/shares/north/namespaces/sales/tables/customers"
    signing = {"X-Iceberg-Access-Delegation": "remote-signing"}
    acme, zeta = (
        load(provider, tokens["acme"], path, **signing),
        load(provider, tokens["zeta"], path, **signing),
    )
    assert acme.status_code == 200 and zeta.status_code == 200, (acme.text, zeta.text)
    assert acme.headers["etag"] != zeta.headers["etag"]
    assert acme.headers["etag"] == load(provider, tokens["acme"], path, **signing).headers["etag"]
    for token, tag in ((tokens["acme"], acme.headers["etag"]), (tokens["zeta"], zeta.headers["etag"])):
        unchanged = load(provider, token, path, **signing, **{"If-None-Match": f'"x", W/{tag}'})
        assert unchanged.status_code == 304 and unchanged.content == b""
        assert unchanged.headers["etag"] == tag
    # One recipient's tag is not the other's answer.
    crossed = load(provider, tokens["zeta"], path, **signing, **{"If-None-Match": acme.headers["etag"]})
    assert crossed.status_code == 200 and crossed.headers["etag"] == zeta.headers["etag"]
    # Vended keys expire: no tag, and a tag or `*` still gets the whole answer with fresh keys.
    south = "/v1/shares/south/namespaces/ops/tables/orders"
    tag = load(provider, tokens["acme"], south, **signing).headers["etag"]
    for match in (tag, "*"):
        vended = load(
            provider,
            tokens["acme"],
            south,
            **{"X-Iceberg-Access-Delegation": "vended-credentials", "If-None-Match": match},
        )
        assert vended.status_code == 200, vended.text
        assert "etag" not in vended.headers and vended.json()["storage-credentials"]
    # A token that may not read the share gets its refusal, whatever tag it sends.
    refused = load(provider, tokens["zeta"], south, **signing, **{"If-None-Match": tag})
    assert refused.status_code in (403, 404) and refused.json()["error"]["code"] == refused.status_code


# -- the spec's signer (issue 52): POST /v1/{prefix}/namespaces/{ns}/tables/{t}/sign ---------------


def spec_sign(
    provider: dict[str, Any],
    token: str,
    prefix: str,
    table: str,
    method: str,
    uri: str,
    more: dict[str, Any] | None = None,
) -> httpx.Response:
    """The spec's signer of `table` (`schema/name`) under `prefix` (`/shares/S` or empty)."""
    schema, _, name = table.partition("/")
    body = {"method": method, "region": "us-east-1", "uri": uri, "headers": {}, **(more or {})}
    return httpx.post(
        f"{root(provider)}/v1{prefix}/namespaces/{schema}/tables/{name}/sign",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def test_the_spec_signer_signs_reads_of_the_named_table_only(provider: dict[str, Any]) -> None:
    """The same decision as `/v1/aws/s3/sign`, narrowed to the table the path names: its files for
    this recipient, read-only; another table's file is refused even where the token may read it
    (south's orders through north's customers), and so are the other recipient's derived files."""
    tokens, endpoint = provider["tokens"], provider["seaweed"].endpoint
    acme, zeta = tokens["acme"], tokens["zeta"]
    config = get(provider, "/v1/config", acme, warehouse="north").json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign" in config["endpoints"]
    assert config["overrides"]["namespace-separator"] == "%1F"

    def uri(location: str) -> str:
        return f"{endpoint}/{location.removeprefix('s3://')}"

    acme_files = data_files(catalog(provider, acme, "north", **SIGNED).load_table("sales.customers"))
    zeta_files = data_files(catalog(provider, zeta, "north", **SIGNED).load_table("sales.customers"))
    orders_files = data_files(catalog(provider, acme, "south", **SIGNED).load_table("ops.orders"))
    customers = "sales/customers"
    ok = spec_sign(provider, acme, "/shares/north", customers, "GET", uri(acme_files[0]), {"provider": "s3"})
    assert ok.status_code == 200 and ok.headers["cache-control"] == "no-store", ok.text
    fetched = httpx.get(ok.json()["uri"], headers={k: ", ".join(v) for k, v in ok.json()["headers"].items()})
    assert fetched.status_code == 200 and fetched.content[:4] == b"PAR1"
    assert (
        spec_sign(provider, acme, "/shares/south", "ops/orders", "GET", uri(orders_files[0])).status_code
        == 200
    )
    bucket_root = f"{endpoint}/{BUCKET}"
    for token, prefix, table, method, target, status in (
        (acme, "/shares/north", customers, "GET", uri(orders_files[0]), 403),  # another table's file
        (acme, "/shares/north", customers, "GET", uri(zeta_files[0]), 403),  # another recipient's
        (zeta, "/shares/north", customers, "GET", uri(acme_files[0]), 403),
        (acme, "/shares/north", customers, "PUT", uri(acme_files[0]), 403),  # recipients only read
        (acme, "/shares/north", customers, "DELETE", uri(acme_files[0]), 403),
        (acme, "/shares/north", customers, "POST", f"{bucket_root}?delete", 403),  # a batch delete
        (acme, "/shares/north", customers, "GET", f"{bucket_root}?list-type=2", 403),  # a listing
        (acme, "/shares/north", customers, "GET", "http://evil.example/" + acme_files[0][5:], 403),
        (acme, "/shares/north", customers, "GET", f"{endpoint}/elsewhere/customers/x.parquet", 403),
        (zeta, "/shares/south", "ops/orders", "GET", uri(orders_files[0]), 404),  # not granted
        (acme, "/shares/north", "sales/nope", "GET", uri(acme_files[0]), 404),
        (tokens["north-own"], "", customers, "GET", uri(acme_files[0]), 403),  # no recipient
        ("not-a-token", "/shares/north", customers, "GET", uri(acme_files[0]), 401),
    ):
        answer = spec_sign(provider, token, prefix, table, method, target)
        error = refusal(answer, status)
        assert error["type"] in ("ForbiddenException", "NoSuchTableException", "NoSuchNamespaceException",
                                 "NotFoundException", "NotAuthorizedException"), error  # fmt: skip
    for more in ({"provider": "gcs"}, {"provider": None}, {"region": 1}, {"body": {"x": 1}}):
        refusal(spec_sign(provider, acme, "/shares/north", customers, "GET", uri(acme_files[0]), more), 400)
