"""A read-only Iceberg REST catalog over the same shares and tokens, under `/iceberg`.

/iceberg/v1/config                                 catalog configuration
/iceberg/v1/oauth/tokens                           OAuth client credentials → access tokens
/iceberg/v1/namespaces[/{schema}]                  the token's share's schemas
/iceberg/v1/namespaces/{schema}/tables[/{table}]   its Iceberg tables; load table
/iceberg/v1/namespaces/{schema}/tables/{t}/credentials  fresh vended keys (credential vending on)
/iceberg/v1/aws/s3/sign                            remote signing of the tables' file reads
/iceberg/v1/namespaces/{schema}/tables/{t}/sign    the same for one table, as Iceberg 1.11 names it

A share token is the catalog's bearer token and sees exactly its share, as on
`/delta-sharing`. Loading a table returns its metadata cut to the grant (see
`share_store/iceberg_shares/visible_metadata.py`) and a `config` that points the client's
S3 reads at this server's signer, or, with credential vending on and asked for,
keys scoped to the table (`delegation.py`); the server's own keys never leave it.
Every write endpoint answers 403 in the spec's error model, with no effect.
Errors use the Iceberg REST error model: `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from functools import partial

from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from share_store.catalog.names import NAMESPACE_SEPARATOR
from share_store.errors import Forbidden, InvalidParameter, NotFound, Unauthenticated
from share_store.iceberg.etags import shared_load_tag
from share_store.iceberg.plan_runs import SCAN_PLAN_BUDGET, PlanRuns
from share_store.iceberg.scan_plans import PlanTokens
from share_store.iceberg_shares.grants import IcebergGrants
from share_store.iceberg_shares.opened_shares import (
    OpenedShare,
    configured_prefix,
    open_share,
    own_share,
    token_answers_config,
)
from share_store.iceberg_shares.share_tables import ShareTables
from share_store.model import SharedTable, Token
from share_store.persistence import ShareStore
from share_store.signing.request_signing import SigningRefused
from share_store.signing.token_codec import TokenCodec
from sharing_server import paths
from sharing_server.auth.bearer import bearer_secret, record_token
from sharing_server.auth.oauth import OAuthTokens
from sharing_server.http.entity_tags import not_modified, with_tag
from sharing_server.http.iceberg_errors import IcebergError, error_response, iceberg_error_model
from sharing_server.http.sign_requests import SignRequest, parse_sign_request
from sharing_server.iceberg_shares.authentication import ShareTokenAuthentication, share_token
from sharing_server.iceberg_shares.delegation import read_access, storage_credentials, vend
from sharing_server.iceberg_shares.metrics_reports import metrics_report_type
from sharing_server.iceberg_shares.scan_plans import PLAN_ENDPOINTS, SharePlans
from sharing_server.observability.audit import audit_fields
from sharing_server.observability.metrics import Metrics

Endpoint = Callable[[Request], Awaitable[Response]]

READ_ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
]
VENDING_ENDPOINTS = ["GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"]
#: The spec's signer (Iceberg 1.11), beside `/v1/aws/s3/sign`: signing is always served here.
SIGN_ENDPOINTS = ["POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"]
#: Served at the URLs that name the share only: the others' configuration stays as it was.
METRICS_ENDPOINTS = ["POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics"]


def _parsed(raw: bytes) -> SignRequest:
    try:
        return parse_sign_request(raw)
    except InvalidParameter as error:
        raise IcebergError(400, error.message) from None


class ShareCatalog:
    """The recipients' read-only catalog, given the store, the tables' grants and the metrics."""

    def __init__(
        self,
        store: ShareStore,
        grants: IcebergGrants,
        metrics: Metrics,
        plans: TokenCodec | None = None,
        runs: PlanRuns | None = None,
    ) -> None:
        self.store = store
        self.grants = grants
        self.metrics = metrics
        #: The tokens' shares' namespaces and tables, and which table signs a read.
        self.shares = ShareTables(store, grants)
        #: Server-side scan planning, its tokens signed with the server's key (`plans`, which every
        #: replica shares), else with a key of this process only; `runs`, those made in the
        #: background past their budget (`[limits] scan_plan_budget`).
        tokens = PlanTokens(plans or TokenCodec(os.urandom(32), "scan-plan"))
        self.plans = SharePlans(self, tokens, runs or PlanRuns(SCAN_PLAN_BUDGET))

    # -- which share the request reads, and the table it names ----------------------------

    async def _opened(self, request: Request) -> tuple[Token, OpenedShare]:
        """The token and the share the request reads: the one its URL names, if open to the token
        (looked up again each time: a grant removed is refused at once), else the token's own."""
        token = share_token(request)
        name = request.path_params.get("share")
        if name is None:
            return token, own_share(token)
        _, opened = await run_in_threadpool(open_share, self.store, bearer_secret(request), str(name))
        return token, opened

    @staticmethod
    def _schema_name(request: Request) -> str:
        # Multi-level namespaces arrive joined by 0x1F; a share's schemas have one level.
        return str(request.path_params["namespace"])

    async def _table(self, request: Request) -> tuple[Token, OpenedShare, SharedTable]:
        """The token, its share, and the table the URL names if that share holds it."""
        token, opened = await self._opened(request)
        schema, name = self._schema_name(request), str(request.path_params["table"])
        audit_fields(request).update(schema=schema, table=name)
        table = await run_in_threadpool(self.shares.table, opened.name, schema, name, opened.audience)
        return token, opened, table

    # -- catalog endpoints ----------------------------------------------------------------

    async def get_config(self, request: Request) -> Response:
        if "share" in request.path_params:
            prefix: str | None = (await self._opened(request))[1].prefix
        else:
            warehouse = request.query_params.get("warehouse") or None
            secret, token = bearer_secret(request), share_token(request)
            if token_answers_config(token, warehouse):
                prefix = configured_prefix(self.store, secret, token, warehouse)
            else:
                prefix = await run_in_threadpool(configured_prefix, self.store, secret, token, warehouse)
        endpoints = READ_ENDPOINTS + SIGN_ENDPOINTS + (METRICS_ENDPOINTS if prefix else [])
        endpoints += VENDING_ENDPOINTS if self.grants.vends else []
        endpoints += PLAN_ENDPOINTS
        # The spec's default separator of a namespace's levels, said (1.11): a share's have one.
        overrides = {"prefix": prefix} if prefix else {}
        overrides["namespace-separator"] = NAMESPACE_SEPARATOR
        return JSONResponse({"defaults": {}, "overrides": overrides, "endpoints": endpoints})

    async def list_namespaces(self, request: Request) -> Response:
        _, opened = await self._opened(request)
        parent = request.query_params.get("parent")
        schemas = await run_in_threadpool(self.shares.namespaces, opened.name, parent)
        return JSONResponse({"namespaces": [[schema] for schema in schemas]})

    async def get_namespace(self, request: Request) -> Response:
        _, opened = await self._opened(request)
        schema = await run_in_threadpool(self.shares.namespace, opened.name, self._schema_name(request))
        if request.method == "HEAD":
            return Response(status_code=204)
        return JSONResponse({"namespace": [schema], "properties": {}})

    async def list_tables(self, request: Request) -> Response:
        _, opened = await self._opened(request)
        schema = self._schema_name(request)
        tables = await run_in_threadpool(self.shares.tables, opened.name, schema, opened.audience)
        identifiers = [{"namespace": [schema], "name": t.name} for t in tables]
        return JSONResponse({"identifiers": identifiers})

    async def load_table(self, request: Request) -> Response:
        token, opened, table = await self._table(request)
        if request.method == "HEAD":
            return Response(status_code=204)
        grants = self.grants
        grant = await run_in_threadpool(grants.load, table)
        signer = (
            paths.ICEBERG_SHARE_S3_SIGN.format(share=opened.name) if opened.named else paths.ICEBERG_S3_SIGN
        )
        access = await run_in_threadpool(
            read_access, request, self.metrics, grants, table, token, grant, signer
        )
        body = {
            "metadata-location": grant.metadata_location,
            "metadata": grant.shared_metadata(table.history_shared),
            **access,
        }
        vended = "storage-credentials" in access
        text = bytes(JSONResponse(body).body)  # as Starlette writes it, hashed for the tag
        audience = opened.audience
        tag = shared_load_tag(text, audience.recipient, audience.properties, vended)
        unchanged = not_modified(request.headers, tag)
        if unchanged is not None:
            return unchanged
        headers = {"Cache-Control": "no-store"} if vended else None
        return Response(text, media_type="application/json", headers=with_tag(headers, tag))

    async def load_credentials(self, request: Request) -> Response:
        """The spec's credentials refresh: fresh keys for a table, when vending is on."""
        token, _, table = await self._table(request)
        grants = self.grants
        grant = await run_in_threadpool(self.shares.grant_to_vend, table)
        keys = await run_in_threadpool(vend, request, self.metrics, grants, table, token, grant)
        body = {"storage-credentials": storage_credentials(keys, grant)}
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def report_metrics(self, request: Request) -> Response:
        """The spec's metrics report of a scan or commit of a table the share holds: taken (its kind
        in the audit line) and kept nowhere else, so that engines that report do not log failures."""
        await self._table(request)
        audit_fields(request)["metrics_report"] = metrics_report_type(await request.body())
        return Response(status_code=204)

    async def sign_request(self, request: Request) -> Response:
        """Signs a read of one object of a table the token's share holds; refuses anything else with 403."""
        metrics = self.metrics
        method, uri, headers = _parsed(await request.body())
        fields = audit_fields(request)

        def signed() -> tuple[str, dict[str, list[str]]]:
            # The token, its share and the signature in one trip to a worker thread: a scan signs
            # every object it reads, one request each, and each trip costs the event loop a wakeup.
            try:
                opened = self._signing_share(request)
            except (Unauthenticated, Forbidden, NotFound) as error:
                raise SigningRefused(error.message) from None
            return self.shares.sign(opened.name, method, uri, headers, fields, opened.audience)

        try:
            signed_uri, signed_headers = await run_in_threadpool(signed)
        except SigningRefused as error:
            metrics.iceberg_signatures.labels("refused").inc()
            raise IcebergError(403, str(error)) from None
        metrics.iceberg_signatures.labels("signed").inc()
        return JSONResponse(
            {"uri": signed_uri, "headers": signed_headers}, headers={"Cache-Control": "no-store"}
        )

    async def sign_table_request(self, request: Request) -> Response:
        """The spec's signer (`POST .../tables/{t}/sign`): the token by the catalog's authentication,
        the table by the path (404 if the share does not hold it for this token), the read signed
        only if that table's grant allows it, as `sign_request` decides; 403 otherwise."""
        _, _, table = await self._table(request)
        method, uri, headers = _parsed(await request.body())
        try:
            signed = await run_in_threadpool(
                self.shares.sign_table, table, method, uri, headers, audit_fields(request)
            )
        except SigningRefused as error:
            self.metrics.iceberg_signatures.labels("refused").inc()
            raise IcebergError(403, str(error)) from None
        self.metrics.iceberg_signatures.labels("signed").inc()
        signed_uri, signed_headers = signed
        return JSONResponse(
            {"uri": signed_uri, "headers": signed_headers}, headers={"Cache-Control": "no-store"}
        )

    def _signing_share(self, request: Request) -> OpenedShare:
        """The signer's token and share, by its URL as the catalog's are (the signer is behind no
        authentication backend: each of its refusals is a 403)."""
        secret = bearer_secret(request)
        name = request.path_params.get("share")
        if name is not None:
            return open_share(self.store, secret, str(name), partial(record_token, request))[1]
        token = self.store.authenticate(secret)
        record_token(request, token)
        return own_share(token)

    async def read_only(self, request: Request) -> Response:
        if request.method in ("GET", "HEAD"):
            return error_response(404, f"No such endpoint: {request.url.path}", "NoSuchEndpointException")
        return error_response(403, "This catalog is read-only: shares are changed by their provider")


#: The Iceberg type of a 404 whose error names none (`NoSuchTableException` for routes not here).
NOT_FOUND = {
    "iceberg_namespaces": "NoSuchNamespaceException",
    "iceberg_namespace": "NoSuchNamespaceException",
    "iceberg_tables": "NoSuchNamespaceException",
    # A warehouse (share) that is not there, or not the token's: the spec names no type of its own.
    "iceberg_config": "NotFoundException",
    "iceberg_share_config": "NotFoundException",
    "iceberg_share_namespaces": "NoSuchNamespaceException",
    "iceberg_share_namespace": "NoSuchNamespaceException",
    "iceberg_share_tables": "NoSuchNamespaceException",
}


def iceberg_mount(catalog: ShareCatalog, oauth: OAuthTokens) -> Mount:
    """`/iceberg`: the routes, behind the Iceberg error model."""
    routes = iceberg_routes(catalog, oauth)
    return Mount(paths.ICEBERG_PREFIX, routes=routes, middleware=[iceberg_error_model(routes, NOT_FOUND)])


def iceberg_routes(catalog: ShareCatalog, oauth: OAuthTokens) -> list[Route]:
    """The catalog's routes, named `iceberg_*` (the OpenAPI document finds their specs by name)."""
    everything = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]
    # Every route but the token endpoint and the signer (a refused token is its 403) takes a token.
    token = [Middleware(AuthenticationMiddleware, backend=ShareTokenAuthentication(catalog.store))]
    plans = catalog.plans

    def tokened(path: str, endpoint: Endpoint, methods: list[str], name: str) -> Route:
        return Route(path, endpoint, methods=methods, name=name, middleware=token)

    return [
        tokened(paths.ICEBERG_CONFIG, catalog.get_config, ["GET"], "iceberg_config"),
        Route(
            paths.ICEBERG_OAUTH_TOKENS, oauth.token_endpoint, methods=["POST"], name="iceberg_oauth_tokens"
        ),
        tokened(paths.ICEBERG_NAMESPACES, catalog.list_namespaces, ["GET"], "iceberg_namespaces"),
        tokened(paths.ICEBERG_NAMESPACE, catalog.get_namespace, ["GET", "HEAD"], "iceberg_namespace"),
        tokened(paths.ICEBERG_TABLES, catalog.list_tables, ["GET"], "iceberg_tables"),
        tokened(paths.ICEBERG_TABLE, catalog.load_table, ["GET", "HEAD"], "iceberg_table"),
        tokened(paths.ICEBERG_CREDENTIALS, catalog.load_credentials, ["GET"], "iceberg_credentials"),
        tokened(paths.ICEBERG_TABLE_PLAN, plans.plan, ["POST"], "iceberg_table_plan"),
        tokened(paths.ICEBERG_TABLE_PLAN_ID, plans.plan_by_id, ["GET", "DELETE"], "iceberg_plan"),
        tokened(paths.ICEBERG_TABLE_TASKS, plans.tasks, ["POST"], "iceberg_table_tasks"),
        Route(paths.ICEBERG_S3_SIGN, catalog.sign_request, methods=["POST"], name="iceberg_s3_sign"),
        tokened(paths.ICEBERG_TABLE_SIGN, catalog.sign_table_request, ["POST"], "iceberg_table_sign"),
        # The same catalog with the share named: any token the share is open to.
        tokened(paths.ICEBERG_SHARE_CONFIG, catalog.get_config, ["GET"], "iceberg_share_config"),
        tokened(paths.ICEBERG_SHARE_NAMESPACES, catalog.list_namespaces, ["GET"], "iceberg_share_namespaces"),
        tokened(
            paths.ICEBERG_SHARE_NAMESPACE, catalog.get_namespace, ["GET", "HEAD"], "iceberg_share_namespace"
        ),
        tokened(paths.ICEBERG_SHARE_TABLES, catalog.list_tables, ["GET"], "iceberg_share_tables"),
        tokened(paths.ICEBERG_SHARE_TABLE, catalog.load_table, ["GET", "HEAD"], "iceberg_share_table"),
        tokened(
            paths.ICEBERG_SHARE_CREDENTIALS, catalog.load_credentials, ["GET"], "iceberg_share_credentials"
        ),
        tokened(paths.ICEBERG_SHARE_METRICS, catalog.report_metrics, ["POST"], "iceberg_share_metrics"),
        tokened(paths.ICEBERG_SHARE_TABLE_PLAN, plans.plan, ["POST"], "iceberg_share_table_plan"),
        tokened(paths.ICEBERG_SHARE_TABLE_PLAN_ID, plans.plan_by_id, ["GET", "DELETE"], "iceberg_share_plan"),
        tokened(paths.ICEBERG_SHARE_TABLE_TASKS, plans.tasks, ["POST"], "iceberg_share_table_tasks"),
        tokened(
            paths.ICEBERG_SHARE_TABLE_SIGN, catalog.sign_table_request, ["POST"], "iceberg_share_table_sign"
        ),
        Route(
            paths.ICEBERG_SHARE_S3_SIGN, catalog.sign_request, methods=["POST"], name="iceberg_share_s3_sign"
        ),
        tokened(paths.ICEBERG_OTHER, catalog.read_only, everything, "iceberg_read_only"),
    ]
