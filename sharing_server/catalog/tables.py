"""AIStor Tables' catalog API for tables: list, create (staged too), load, commit, drop, rename,
register, multi-table transactions and metrics reports, under `/_iceberg/v1/{prefix}`; and, as
Lakekeeper has them, the dropped tables: listed (`GET .../tables?dropped=true`) and undropped
(`POST /v1/{prefix}/tables/undrop`).

Each handler reads the request (its proof, path and query), then calls down: the
body is read into pyiceberg's models and the names checked by
`sharing_server.catalog.codec`, the caller's policy by `CatalogAccess`, the commit
and location rules by the catalog. A failed requirement, or a commit that lost
the race for the table's pointer, is a 409 `CommitFailedException`, which clients
answer by refreshing and retrying.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.catalog.access import CatalogAccess
from share_store.catalog.names import TableName
from share_store.iceberg.etags import table_load_tag
from sharing_server import paths
from sharing_server.catalog import codec
from sharing_server.catalog.endpoints import CatalogEndpoints
from sharing_server.http.access_delegation import asked_modes
from sharing_server.http.entity_tags import not_modified, with_tag
from sharing_server.http.sign_requests import parse_sign_request_with_body
from sharing_server.observability.audit import audit_fields


def _no_store(delegation: tuple[dict[str, str], list[Any]]) -> dict[str, str] | None:
    """Answers that carry keys or a signing grant are kept by no cache."""
    config, credentials = delegation
    return {"Cache-Control": "no-store"} if config or credentials else None


def _json(
    body: bytes, headers: dict[str, str] | None = None, background: BackgroundTask | None = None
) -> Response:
    """An answer `rest` made as JSON already (a table's metadata as the bytes of its file)."""
    return Response(body, media_type="application/json", headers=headers, background=background)


def _after(later: list[Callable[[], None]]) -> BackgroundTask | None:
    """What a commit left to do (old metadata files to delete), run once its answer is sent: in a
    worker thread, as Starlette runs a plain function's background task."""
    if not later:
        return None

    def run() -> None:
        for step in later:
            step()  # each logs and swallows its own failure (`WarehouseCatalog._delete_superseded`)

    return BackgroundTask(run)


class TableEndpoints(CatalogEndpoints):
    async def tables(self, request: Request) -> Response:
        params, asked = request.path_params, asked_modes(request.headers)
        signer = str(request.base_url).rstrip("/") + paths.WAREHOUSE_PREFIX
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        if request.method == "POST":
            table, new = codec.new_table(warehouse, levels, await request.body())
            loaded = await run_in_threadpool(access.create_table, table, new)
            # A staged create's keys or signatures are for the location handed out with it.
            delegation = await run_in_threadpool(
                self.data.delegate, asked, access, table, loaded, signer, audit_fields(request)
            )
            # Tagged as the load that follows it will be (a staged create has no metadata file: none).
            tag = table_load_tag(loaded.metadata_location, "all", *delegation, bool(delegation[0]))
            return _json(codec.load_answer(loaded, "all", delegation), with_tag(_no_store(delegation), tag))
        if codec.dropped_asked(request.query_params.get("dropped")):
            dropped = await run_in_threadpool(access.list_dropped, warehouse, levels)
            return JSONResponse(codec.dropped_result(dropped))
        names = await run_in_threadpool(access.list_tables, warehouse, levels)
        return JSONResponse(codec.identifiers_result(levels, names))

    async def undrop(self, request: Request) -> Response:
        """Tables dropped without purge live again under their names, all or none (409 for a name
        taken now): Lakekeeper's undrop, asking `s3tables:UndropTable` on each."""
        warehouse = request.path_params["prefix"]
        access = await self.access(request)
        targets = codec.undrop_targets(warehouse, await request.body())
        await run_in_threadpool(access.undrop, targets)
        return Response(status_code=204)

    async def table(self, request: Request) -> Response:
        params, query, asked = request.path_params, request.query_params, asked_modes(request.headers)
        signer = str(request.base_url).rstrip("/") + paths.WAREHOUSE_PREFIX

        def table_name() -> TableName:  # read once the caller is known, as all of the request
            return codec.table_at(params["prefix"], params["namespace"], params["table"])

        # A load and a commit (the calls engines make most) authenticate and do all their work in
        # one trip to a worker thread.
        if request.method == "POST":
            later: list[Callable[[], None]] = []
            body = await request.body()  # read with the proof already (SigV4 signs it)

            def commit(access: CatalogAccess) -> tuple[bytes, dict[str, str] | None]:
                name = table_name()
                loaded = access.commit(name, codec.commit(name, body), later)
                # The tag the next plain load (no delegation, all snapshots) will have (1.11).
                return codec.commit_answer(loaded), with_tag(None, table_load_tag(loaded.metadata_location))

            answer, tagged = await self.as_caller(request, commit)
            return _json(answer, tagged, background=_after(later))
        if request.method == "GET":
            notes = audit_fields(request)

            def load(access: CatalogAccess) -> Response:
                name, snapshots = table_name(), codec.snapshots_mode(query.get("snapshots"))
                loaded = access.load_table(name)
                delegation = self.data.delegate(asked, access, name, loaded, signer, notes)
                config, credentials = delegation
                # A writer's delegation is keys or a signing grant, both of which expire: untagged.
                tag = table_load_tag(loaded.metadata_location, snapshots, config, credentials, bool(config))
                unchanged = not_modified(request.headers, tag)
                if unchanged is not None:
                    return unchanged
                return _json(
                    codec.load_answer(loaded, snapshots, delegation), with_tag(_no_store(delegation), tag)
                )

            return await self.as_caller(request, load)
        access = await self.access(request)
        name = table_name()
        if request.method == "DELETE":
            purge = query.get("purgeRequested", "false").lower() == "true"
            await run_in_threadpool(access.drop_table, name, purge)
            return Response(status_code=204)
        exists = await run_in_threadpool(access.table_exists, name)  # HEAD
        return Response(status_code=204 if exists else 404)

    async def credentials(self, request: Request) -> Response:
        """The spec's credentials refresh: fresh keys for the table's location, when vending is on."""
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        loaded = await run_in_threadpool(access.load_table, name)
        vended = await run_in_threadpool(self.data.refreshed, access, name, loaded, audit_fields(request))
        return JSONResponse({"storage-credentials": vended}, headers={"Cache-Control": "no-store"})

    async def sign(self, request: Request) -> Response:
        """The writers' remote signer: one S3 request of an engine holding a grant of a table load.

        The grant in the path is the proof (pyiceberg's signer sends no catalog credentials with
        SigV4): it names the caller and the table, and each request is checked against them."""
        params, body, notes = request.path_params, await request.body(), audit_fields(request)
        (method, uri, headers), deleted = parse_sign_request_with_body(body)
        signed_uri, signed = await run_in_threadpool(
            self.data.sign,
            params["prefix"],
            params["grant"],
            self.callers.principal,
            self.catalog,
            method,
            uri,
            headers,
            notes,
            deleted,
        )
        return JSONResponse({"uri": signed_uri, "headers": signed}, headers={"Cache-Control": "no-store"})

    async def sign_table(self, request: Request) -> Response:
        """The spec's signer (`POST .../tables/{t}/sign`, Iceberg 1.11): the caller by the catalog's
        own authentication (bearer or SigV4), the table by the path; the decision is the grant
        signer's (`DataAccess.sign_table`)."""
        params, body, notes = request.path_params, await request.body(), audit_fields(request)

        def sign(access: CatalogAccess) -> tuple[str, dict[str, list[str]]]:
            self.data.signing_on()  # said first: not served here while signing is off
            name = codec.table_at(params["prefix"], params["namespace"], params["table"])
            (method, uri, headers), deleted = parse_sign_request_with_body(body)
            return self.data.sign_table(access, name, method, uri, headers, notes, deleted)

        signed_uri, signed = await self.as_caller(request, sign)
        return JSONResponse({"uri": signed_uri, "headers": signed}, headers={"Cache-Control": "no-store"})

    async def register(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        name, metadata_location, overwrite = codec.registration(warehouse, levels, await request.body())
        loaded = await run_in_threadpool(access.register_table, name, metadata_location, overwrite)
        return _json(codec.load_answer(loaded), with_tag(None, table_load_tag(loaded.metadata_location)))

    async def rename(self, request: Request) -> Response:
        warehouse = request.path_params["prefix"]
        access = await self.access(request)
        source, target = codec.renaming(warehouse, await request.body())
        await run_in_threadpool(access.rename_table, source, target)
        return Response(status_code=204)

    async def transaction(self, request: Request) -> Response:
        warehouse = request.path_params["prefix"]
        access = await self.access(request)
        later: list[Callable[[], None]] = []
        await run_in_threadpool(
            access.commit_transaction, codec.transaction(warehouse, await request.body()), later
        )
        return Response(status_code=204, background=_after(later))

    async def metrics(self, request: Request) -> Response:
        """Metrics reports are accepted and dropped: the audit line already records the request."""
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        access.report_metrics(name)
        codec.json_object(await request.body())
        return Response(status_code=204)
