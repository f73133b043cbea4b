"""The console's HTTP side: aiohttp serves pages rendered with jinja2, the charts' figures as JSON, and the
vendored charting library (static/uPlot.*, uPlot 1.6.32 from npm, MIT licence: static/uPlot.LICENSE).

Security, as docs/console.md explains: the listener binds loopback unless told otherwise, and then only with
HTTP basic authentication or a bearer token configured; every change is a POST carrying a CSRF token (a
random cookie, SameSite=Strict, echoed in a hidden form field, the double-submit pattern) and, when the
browser sends one, an Origin naming this console. What the cluster shows is what the console's principal
may see: the broker filters Metadata, ListGroups and the rest by its ACLs.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hmac
import ipaddress
import logging
import secrets
import socket
import time
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from typing import Any, Awaitable, Callable, Mapping

import anyio
import anyio.to_thread
import jinja2
from aiohttp import web

from odradek.broker.network.kafka_client import KafkaClient
from odradek.tools.admin_common import CONFIG_SOURCES, topic_metadata
from odradek.tools.admin_topics import create_partitions, create_topic, delete_topics
from odradek.tools.console import actions
from odradek.tools.console.cluster import ADMIN_ERRORS, ZooKeeperView, read_cluster, read_zookeeper, topic_configs
from odradek.tools.console.groups import list_group_states, read_group
from odradek.tools.console.messages import FORMATS, browse, produce, render
from odradek.tools.console.sampler import Sampler

log = logging.getLogger("odradek.console")

CSRF_COOKIE = "odradek_console_csrf"
CSRF_FIELD = "csrf"
DEFAULT_LISTENER = "http://127.0.0.1:9644"
PAGE_LIMIT = 50
CLIENT_ID = "odradek-console"
RECONNECT_BACKOFF_S = (1.0, 30.0)
"""The wait before the console connects to the cluster again: doubling from the first to the second (a
console whose principal is refused must not fill the broker's log with a login every second)."""
SECURITY_HEADERS = {
    # Scripts and styles from the console only (uPlot sets element styles, hence 'unsafe-inline' for
    # styles alone); no framing, so no page of another site can lay the console's buttons under its own.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
TOPIC_CHANGE_WAIT_S = 15.0
"""How long the page after a topic's creation, growth or deletion waits for the console's broker to show
it; past it the page is shown as it is (a created topic's: the topics' list, which says it was created)."""
TOPIC_CHANGE_POLL_S = 0.1
FIRST_SAMPLE_WAIT_S = 10.0
"""How long the charts page waits for the sampler, started by the first page asked for, to have read the
brokers' configs: until then it cannot know whether they have Prometheus endpoints, and a page drawn
without knowing would lay out the charts of a cluster without them (and say so) until reloaded."""
ACTIONS = frozenset({"delete", "partitions", "configs", "reset"})
"""The last path segment of the POSTs that have no page of their own: after one, the page above it."""


async def _until_seen(client: KafkaClient, topic: str, seen: Callable[[Any], bool]) -> bool:
    """Whether the broker the console reads its metadata from shows a change to ``topic`` (``seen`` of its
    metadata, None while it describes no such topic) within :data:`TOPIC_CHANGE_WAIT_S`. The controller
    answers CreateTopics, CreatePartitions and DeleteTopics once its own metadata shows the change; the other
    brokers learn of it from its UpdateMetadata a moment later, and the page shown next must not predate it
    (a new topic's page "not found", the old partition count)."""
    with anyio.move_on_after(TOPIC_CHANGE_WAIT_S):
        while not seen((await topic_metadata(client, [topic])).get(topic)):
            await anyio.sleep(TOPIC_CHANGE_POLL_S)
        return True
    return False


class ConsoleConfigError(ValueError):
    """A console setting that cannot work; the message names the key."""


@dataclass(frozen=True)
class ConsoleSettings:
    """The ``console.*`` keys (broker/config.py declares them for ``odradek serve``)."""

    host: str
    port: int
    basic_user: str | None = None
    basic_password: str | None = None
    bearer_token: str | None = None
    title: str = "odradek console"

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], *, title: str = "odradek console") -> "ConsoleSettings":
        url = urllib.parse.urlsplit(props.get("console.listener") or DEFAULT_LISTENER)
        if url.scheme != "http" or url.port is None or url.path not in ("", "/"):
            raise ConsoleConfigError(f"console.listener must be http://host:port, not {props.get('console.listener')!r}")
        settings = cls(
            url.hostname or "",
            url.port,
            props.get("console.basic.auth.user") or None,
            props.get("console.basic.auth.password") or None,
            props.get("console.bearer.token") or None,
            title,
        )
        if settings.basic_user and not settings.basic_password:
            raise ConsoleConfigError("console.basic.auth.user needs console.basic.auth.password")
        if not settings.loopback and not settings.authenticates:
            raise ConsoleConfigError(f"console.listener {settings.host or '0.0.0.0'} is not a loopback address: set console.basic.auth.user and console.basic.auth.password, or console.bearer.token")
        return settings

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def authenticates(self) -> bool:
        return bool(self.basic_user or self.bearer_token)

    def bind(self) -> socket.socket:
        """The listening socket, bound now so that a port in use stops ``odradek serve`` at start-up."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        return sock


def _human_bytes(n: int | float | None) -> str:
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _parse_time(text: str) -> int:
    """A timestamp field: milliseconds since the epoch, or an ISO date-time (UTC unless it names a zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Console:
    """The web application over one Kafka client, connected (and reconnected) by :meth:`serve`."""

    def __init__(self, bootstrap: str, settings: ConsoleSettings, *, security: Any = None, sample_interval_s: float | None = None) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.security = security
        self.client: KafkaClient | None = None
        self.connect_error: str | None = None
        self.sampler: Sampler | None = None
        self._sample_interval_s = sample_interval_s
        self.templates = jinja2.Environment(loader=jinja2.PackageLoader("odradek.tools.console", "templates"), autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.filters["bytes"] = _human_bytes
        self.templates.filters["path"] = lambda name: urllib.parse.quote(name, safe="")  # one path segment, "/" too
        self.templates.filters["render"] = render
        self.templates.filters["source"] = lambda s: CONFIG_SOURCES.get(s, str(s))
        self.templates.filters["rate"] = lambda r: "–" if r is None else f"{r:,.1f}/s"
        self.app = self._make_app()

    # -- serving -----------------------------------------------------------------------------------------

    async def serve(self, sock: socket.socket) -> None:
        """Serve on ``sock`` until cancelled; the Kafka client connects (and after a failure reconnects)
        meanwhile, and pages say so until it has."""
        runner = web.AppRunner(self.app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
            host, port = sock.getsockname()[:2]
            log.info("Console at http://%s:%d/ (cluster at %s)", host, port, self.bootstrap)
            await self._stay_connected()
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()

    async def _stay_connected(self) -> None:
        kwargs: dict[str, Any] = {"client_id": CLIENT_ID, "request_timeout_s": 15.0}
        if self.security is not None:
            kwargs["security"] = self.security
        backoff_s = RECONNECT_BACKOFF_S[0]
        while True:
            try:
                async with KafkaClient(self.bootstrap, **kwargs) as client:
                    self.client, self.connect_error = client, None
                    backoff_s = RECONNECT_BACKOFF_S[0]
                    self.sampler = Sampler(client) if self._sample_interval_s is None else Sampler(client, self._sample_interval_s)
                    await self.sampler.run()
            except ADMIN_ERRORS as exc:
                self.connect_error = f"cannot reach the cluster at {self.bootstrap}: {exc}"
                log.warning("Console: %s", self.connect_error)
            except Exception as exc:  # noqa: BLE001 -- a fault of the console must never stop the broker it runs in
                self.connect_error = f"the console failed: {exc}"
                log.exception("Console failed; connecting again")
            finally:
                self.client = None
            await anyio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RECONNECT_BACKOFF_S[1])

    # -- the application ---------------------------------------------------------------------------------

    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._authenticate, self._guard_csrf, self._show_errors])
        get, post = web.get, web.post
        app.add_routes([
            get("/", self.cluster_page),
            get("/topics", self.topics_page),
            post("/topics", self.create_topic),
            get("/topics/{topic}", self.topic_page),
            post("/topics/{topic}/delete", self.delete_topic),
            post("/topics/{topic}/partitions", self.add_partitions),
            post("/topics/{topic}/configs", self.alter_config),
            get("/topics/{topic}/messages", self.messages_page),
            post("/topics/{topic}/messages", self.produce_message),
            get("/groups", self.groups_page),
            get("/groups/{group}", self.group_page),
            post("/groups/{group}/reset", self.reset_offsets),
            post("/groups/{group}/delete", self.delete_group),
            get("/charts", self.charts_page),
            get("/api/charts", self.charts_json),
            get("/api/groups/{group}/lag", self.lag_json),
        ])
        app.router.add_static("/static", str(resources.files("odradek.tools.console") / "static"))
        return app

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        s = self.settings
        if not s.authenticates:
            return await handler(request)
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        ok = False
        if scheme.lower() == "bearer" and s.bearer_token:
            ok = hmac.compare_digest(credentials.strip().encode(), s.bearer_token.encode())
        elif scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user = password = ""
            if s.basic_user:
                ok = hmac.compare_digest(user.encode(), s.basic_user.encode()) & hmac.compare_digest(password.encode(), (s.basic_password or "").encode())
            if not ok and s.bearer_token:
                ok = hmac.compare_digest(password.encode(), s.bearer_token.encode())
        if not ok:
            return web.Response(status=401, text="Authentication required", headers={"WWW-Authenticate": 'Basic realm="odradek console", charset="UTF-8"'})
        return await handler(request)

    @web.middleware
    async def _guard_csrf(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = request.cookies.get(CSRF_COOKIE)
        if request.method == "POST":
            form = await request.post()
            origin = request.headers.get("Origin")
            if origin is not None and urllib.parse.urlsplit(origin).netloc != request.host:
                return web.Response(status=403, text="Cross-origin request refused")
            sent = str(form.get(CSRF_FIELD, ""))
            if not token or not hmac.compare_digest(sent.encode(), token.encode()):
                return web.Response(status=403, text="Missing or wrong CSRF token: reload the page and try again")
        request["csrf"] = token or secrets.token_urlsafe(32)
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # redirects and refusals carry the headers too
            exc.headers.update(SECURITY_HEADERS)
            raise
        response.headers.update(SECURITY_HEADERS)
        if token is None:
            response.set_cookie(CSRF_COOKIE, request["csrf"], httponly=True, samesite="Strict", path="/")
        return response

    @web.middleware
    async def _show_errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A refusal by the cluster: a POST goes back to its page with the message, a page shows it."""
        if self.sampler is not None:
            self.sampler.touch()
        try:
            return await handler(request)
        except ADMIN_ERRORS as exc:
            message = str(exc)
        except (ValueError, KeyError) as exc:  # a form field that is not a number, a time, or is missing
            message = f"bad input: {exc}"
        if request.method == "POST":
            raise web.HTTPSeeOther(self._back(request, error=message))
        return await self._page(request, "error.html", status=502, message=message)

    def _back(self, request: web.Request, **flash: str) -> str:
        """The page the form was on (its path only: never another site), with a message."""
        parent, _, last = request.path.rpartition("/")
        url = urllib.parse.urlsplit(request.headers.get("Referer") or (parent if last in ACTIONS else request.path))
        query = {k: v for k, v in urllib.parse.parse_qsl(url.query) if k not in ("ok", "error")} | flash
        return urllib.parse.urlunsplit(("", "", url.path, urllib.parse.urlencode(query), ""))

    async def _page(self, request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
        """A page rendered on a worker thread: a page of a thousand records is CPU work that must not hold up
        the event loop (in ``odradek serve``, the broker's)."""
        render_page = functools.partial(
            self.templates.get_template(template).render,
            title=self.settings.title,
            bootstrap=self.bootstrap,
            csrf=request["csrf"],
            ok=request.query.get("ok"),
            error=request.query.get("error"),
            path=request.path,
            has_metrics=self.sampler is not None and self.sampler.has_metrics,
            **context,
        )
        return web.Response(text=await anyio.to_thread.run_sync(render_page), content_type="text/html", status=status)

    def _client(self) -> KafkaClient:
        if self.client is None:
            raise TimeoutError(self.connect_error or f"connecting to the cluster at {self.bootstrap}")
        return self.client

    # -- pages ---------------------------------------------------------------------------------------------

    async def cluster_page(self, request: web.Request) -> web.Response:
        view = await read_cluster(self._client())
        controller = next((b for b in view.brokers if b.node_id == view.controller_id), None)
        zookeeper = controller.configs.get("zookeeper.connect") if controller else None
        broker_ids = [b.node_id for b in view.brokers]
        zk = await anyio.to_thread.run_sync(read_zookeeper, zookeeper, broker_ids) if zookeeper else ZooKeeperView()
        return await self._page(request, "cluster.html", view=view, zookeeper=zk)

    async def topics_page(self, request: web.Request) -> web.Response:
        view = await read_cluster(self._client(), broker_configs=False)
        show_internal = request.query.get("internal") == "1"
        topics = [t for t in view.topics if show_internal or not t.internal]
        rates = {t.name: self.sampler.latest("topic_records", t.name) if self.sampler else None for t in topics}
        return await self._page(request, "topics.html", view=view, topics=topics, rates=rates, show_internal=show_internal)

    async def topic_page(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        client = self._client()
        view = await read_cluster(client, topics=[name], broker_configs=False)
        topic = view.topic(name)
        if topic is None:
            raise web.HTTPNotFound(text=f"Topic {name} does not exist or may not be described: {'; '.join(view.notes)}")
        configs = await topic_configs(client, name)
        return await self._page(request, "topic.html", view=view, topic=topic, configs=configs)

    async def messages_page(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        q = request.query
        fmt = q.get("format", "text") if q.get("format") in FORMATS else "text"
        form = {k: q.get(k, "") for k in ("partition", "offset", "timestamp", "key", "contains", "limit")}
        form["order"] = "oldest" if q.get("order") == "oldest" else "newest"
        result = await browse(
            self._client(),
            name,
            int(form["partition"] or 0),
            offset=int(form["offset"]) if form["offset"] else None,
            timestamp=_parse_time(form["timestamp"]) if form["timestamp"] else None,
            newest_first=form["order"] == "newest",
            limit=min(int(form["limit"] or PAGE_LIMIT), 1000),
            key=form["key"] or None,
            contains=form["contains"] or None,
        )
        metadata = await read_cluster(self._client(), topics=[name], sizes=False, broker_configs=False)
        topic = metadata.topic(name)
        partitions = [p.partition for p in topic.partitions] if topic else [0]
        return await self._page(request, "messages.html", topic=name, result=result, form=form, fmt=fmt, formats=FORMATS, partitions=partitions)

    async def groups_page(self, request: web.Request) -> web.Response:
        groups = await list_group_states(self._client())
        lags = {g: self.sampler.latest(f"lag:{g}", "total lag") if self.sampler else None for g, _, _ in groups}
        return await self._page(request, "groups.html", groups=groups, lags=lags)

    async def group_page(self, request: web.Request) -> web.Response:
        group = await read_group(self._client(), request.match_info["group"])
        if group.state == "Dead":
            raise web.HTTPNotFound(text=f"Group {group.group_id} does not exist")
        return await self._page(request, "group.html", group=group, scenarios=actions.RESET_SCENARIOS)

    async def charts_page(self, request: web.Request) -> web.Response:
        if self.sampler is not None:  # which charts there are depends on whether the brokers have metrics
            with anyio.move_on_after(FIRST_SAMPLE_WAIT_S):
                await self.sampler.configured.wait()
        return await self._page(request, "charts.html", charts=self.sampler.charts() if self.sampler else {})

    async def charts_json(self, request: web.Request) -> web.Response:
        return web.json_response({"charts": self.sampler.charts() if self.sampler else {}, "has_metrics": self.sampler is not None and self.sampler.has_metrics, "at": time.time()})

    async def lag_json(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        chart = self.sampler.series.chart(f"lag:{group}") if self.sampler else {"times": [], "labels": [], "values": []}
        return web.json_response({"charts": {"lag": chart | {"title": f"Lag of {group}"}}})

    # -- actions (POST) ------------------------------------------------------------------------------------

    async def create_topic(self, request: web.Request) -> web.Response:
        form = await request.post()
        name = str(form["name"]).strip()
        configs = dict(line.split("=", 1) for line in str(form.get("configs", "")).splitlines() if "=" in line)
        client = self._client()
        await create_topic(client, name, int(str(form.get("partitions") or -1)), int(str(form.get("replication_factor") or -1)), {k.strip(): v.strip() for k, v in configs.items()})
        page = f"/topics/{urllib.parse.quote(name, safe='')}" if await _until_seen(client, name, lambda topic: topic is not None) else "/topics"
        raise web.HTTPSeeOther(f"{page}?" + urllib.parse.urlencode({"ok": f"Created topic {name}."}))

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        client = self._client()
        await delete_topics(client, [name])
        await _until_seen(client, name, lambda topic: topic is None)
        raise web.HTTPSeeOther("/topics?" + urllib.parse.urlencode({"ok": f"Deleted topic {name}."}))

    async def add_partitions(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        count = int(str((await request.post())["count"]))
        client = self._client()
        await create_partitions(client, [name], count)
        await _until_seen(client, name, lambda topic: topic is not None and len(topic.partitions) >= count)
        raise web.HTTPSeeOther(self._back(request, ok=f"Topic {name} now has {count} partitions."))

    async def alter_config(self, request: web.Request) -> web.Response:
        form = await request.post()
        name, key = request.match_info["topic"], str(form["key"]).strip()
        value = None if form.get("remove") else str(form.get("value", ""))
        await actions.alter_topic_config(self._client(), name, key, value)
        raise web.HTTPSeeOther(self._back(request, ok=f"Removed {key}." if value is None else f"Set {key}={value}."))

    async def produce_message(self, request: web.Request) -> web.Response:
        form = await request.post()
        name = request.match_info["topic"]
        headers: list[tuple[str, bytes | None]] = [(k.strip(), v.strip().encode()) for k, _, v in (line.partition("=") for line in str(form.get("headers", "")).splitlines() if line.strip())]
        key = str(form.get("key", ""))
        offset = await produce(self._client(), name, int(str(form.get("partition") or 0)), key.encode() if key else None, str(form.get("value", "")).encode(), headers)
        raise web.HTTPSeeOther(self._back(request, ok=f"Produced a record at offset {offset}."))

    async def reset_offsets(self, request: web.Request) -> web.Response:
        form = await request.post()
        group = request.match_info["group"]
        offsets = await actions.reset_offsets(self._client(), group, str(form["scenario"]), str(form.get("value", "")))
        raise web.HTTPSeeOther(self._back(request, ok=f"Reset {len(offsets)} partitions of {group}."))

    async def delete_group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        await actions.delete_group(self._client(), group)
        raise web.HTTPSeeOther("/groups?" + urllib.parse.urlencode({"ok": f"Deleted group {group}."}))
