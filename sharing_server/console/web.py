"""The console's request plumbing: sessions, CSRF, forms, templates, security headers.

Handlers are plain functions `view(call) -> Page | Redirect`, run off the event
loop; `console_endpoint` wraps each one. It answers 403 while the console is
off (no `[admin] token_hash`), sends the signed-out to the sign-in page,
refuses any POST whose CSRF token or Origin is not the session's own, turns
admin errors into a message on the page the form came from, and re-issues the
session cookie so that idle time counts from the last request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from share_store.authentication.console_sessions import (
    COOKIE,
    CSRF_FIELD,
    Session,
    SessionCodec,
    cookie_header,
    csrf_matches,
)
from share_store.authentication.sign_in_throttle import AdminToken
from share_store.catalog.catalog import WarehouseCatalog
from share_store.errors import ShareStoreError
from share_store.readers.table_readers import TableReaders
from sharing_server.admin.commands import Admin
from sharing_server.console import formatting
from sharing_server.observability.audit import audit_fields

SIGN_IN = "/console/sign-in"
HOME = "/console/shares"
# No inline script or style anywhere: everything comes from /console/static.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# Under "no-referrer" browsers send `Origin: null` with forms; "same-origin" lets the
# Origin check see our own origin, and still tells other sites nothing.
PAGE_HEADERS = {"Content-Security-Policy": CSP, "Referrer-Policy": "same-origin"}


def templates() -> Environment:
    environment = Environment(
        loader=PackageLoader("sharing_server.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        size=formatting.size, when=formatting.when, number=formatting.number, ago=formatting.ago
    )
    return environment


@dataclass
class Console:
    """What the console's handlers share, given when the routes are made: the admin operations,
    sessions, the admin token, the tables' readers, the own warehouses, and templates."""

    admin: Admin
    sessions: SessionCodec
    admin_token: AdminToken
    readers: TableReaders
    warehouses: WarehouseCatalog
    activity_retention_hours: float
    #: When the server started (`time.monotonic()`), for the Health page's uptime.
    started: float
    environment: Environment = field(default_factory=templates)


@dataclass
class Call:
    """One request as a view sees it: the request, its form fields, the session."""

    request: Request
    form: dict[str, str]
    session: Session
    console: Console

    @property
    def admin(self) -> Admin:
        return self.console.admin

    def param(self, name: str) -> str:
        return self.request.path_params[name]


@dataclass
class Page:
    template: str
    context: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    #: A session to start (sign-in), or None to keep the current one.
    session: Session | None = None
    #: Headers beside the page's own (a refused sign-in's Retry-After).
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Redirect:
    location: str
    flash: tuple[str, str] | None = None
    session: Session | None = None
    sign_out: bool = False


View = Callable[[Call], Page | Redirect]


def confirmation(call: Call, back: str, title: str, consequence: str, button: str) -> Page:
    """The page that asks before a removal or revocation, saying what stops working; it posts to itself."""
    context = {
        "title": title,
        "consequence": consequence,
        "action": call.request.url.path,
        "back": back,
        "button": button,
    }
    return Page("confirm.html", context)


def safe_path(value: str | None, default: str = HOME) -> str:
    """`value` if it is a path of the console's own, else `default` (no open redirects)."""
    if value and value.startswith("/console/") and "//" not in value and "\\" not in value:
        return value
    return default


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True  # old browsers and non-browser clients; the CSRF token still has to match
    parts = urlsplit(origin)
    return parts.scheme == request.url.scheme and parts.netloc == request.url.netloc


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", "replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def render(
    request: Request,
    page: Page,
    session: Session | None,
    flash: tuple[str, str] | None,
    environment: Environment | None = None,
) -> Response:
    environment = environment or templates()
    context = {
        "request": request,
        "csrf_field": CSRF_FIELD,
        "csrf": session.csrf if session else "",
        "signed_in": bool(session and session.signed_in),
        "flash": flash,
        "path": request.url.path,
        **page.context,
    }
    html = environment.get_template(page.template).render(context)
    return HTMLResponse(html, status_code=page.status, headers={**PAGE_HEADERS, **page.headers})


def _with_cookie(response: Response, request: Request, session: Session, console: Console) -> Response:
    value = console.sessions.encode(session)
    response.headers.append("set-cookie", cookie_header(value, secure=request.url.scheme == "https"))
    return response


def console_endpoint(
    view: View, console: Console | None, public: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap `view`: console on, session (unless `public`), CSRF on POST, errors as messages."""

    async def run(request: Request) -> Response:
        audit_fields(request)["principal"] = "console"
        if console is None:
            message = "The console is off: set [admin] token_hash (sharing-server admin-token) to enable it."
            return render(
                request, Page("error.html", {"title": "Console off", "message": message}, 403), None, None
            )
        session, idled = console.sessions.decode(request.cookies.get(COOKIE))
        if session is not None and session.signed_in:
            if await run_in_threadpool(console.admin.console_session_ended, session.id):
                session = None  # signed out: a copy of the cookie opens nothing
        if not public and (session is None or not session.signed_in):
            if request.method != "GET":
                page = Page("error.html", {"title": "Signed out", "message": "Sign in first."}, 403)
                return render(request, page, None, None, console.environment)
            target = f"{SIGN_IN}?next={quote(request.url.path)}"
            note = ("info", "Your session ended after a while unused: sign in again.") if idled else None
            fresh = Session(flash=note)
            return _with_cookie(RedirectResponse(target, status_code=303), request, fresh, console)
        form: dict[str, str] = {}
        if request.method == "POST":
            form = await _form(request)
            refusal: str | None = None
            if not _same_origin(request):
                refusal = (
                    f"This form came from {request.headers.get('origin')}, not from this server "
                    f"({request.url.scheme}://{request.url.netloc}). Behind a proxy that terminates "
                    "TLS, set [server] proxy_hops so the server knows it is reached over HTTPS."
                )
            elif not csrf_matches(session, form.get(CSRF_FIELD)):
                refusal = "This form did not come from this console session: reload the page and try again."
            if refusal is not None:
                page = Page("error.html", {"title": "Refused", "message": refusal}, 403)
                return render(request, page, session, None, console.environment)
        session = session or Session()
        flash, session = session.flash, replace(session, flash=None)
        try:
            result = await run_in_threadpool(view, Call(request, form, session, console))
        except ShareStoreError as error:
            if request.method == "POST":
                back = safe_path(form.get("back"), request.url.path)
                result = Redirect(back, flash=("error", error.message))
            else:
                title = "Not found" if error.status_code == 404 else "Error"
                result = Page("error.html", {"title": title, "message": error.message}, error.status_code)
        if isinstance(result, Redirect):
            if result.sign_out:
                until = datetime.fromtimestamp(session.ends, UTC)
                await run_in_threadpool(console.admin.end_console_session, session.id, until)
                response = RedirectResponse(result.location, status_code=303)
                return _with_cookie(response, request, Session(flash=result.flash), console)
            next_session = (result.session or session).touched()
            if result.flash:
                next_session = next_session.with_flash(*result.flash)
            return _with_cookie(
                RedirectResponse(result.location, status_code=303), request, next_session, console
            )
        next_session = (result.session or session).touched()
        rendered = render(request, result, next_session, flash, console.environment)
        return _with_cookie(rendered, request, next_session, console)

    run.__name__ = f"console_{view.__name__}"  # the route's name in metrics and the audit log
    return run
