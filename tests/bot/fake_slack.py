"""A fake Slack: the Web API methods the bot calls, the upload URL and response_url webhooks.

It is a real aiohttp server on 127.0.0.1 port 0 (the bot's slack_sdk client and Bolt's
``respond()`` talk to it over HTTP, exactly as to Slack). Every request is recorded with the
answer given. A method can be told to answer 429 with ``Retry-After`` a number of times, to
fail with one of Slack's errors (``not_in_channel``, ``user_not_found``, ...) for some calls
(optionally only for one channel or user), or to hang unanswered (:meth:`FakeSlack.hang`), or
to take a post and then never answer it (:meth:`FakeSlack.land`: it timed out for the client
but landed); a response_url can be told to answer 404 as an expired one does. Posted messages
are kept (:attr:`FakeSlack.messages`) and listed by ``conversations.history``/``replies``
when the token may read them (:attr:`FakeSlack.history_scope`; the bot's manifest asks for
no read scope, so by default they answer ``missing_scope`` as Slack does). The helpers at the bottom
sign requests to the bot the way Slack does (v0 HMAC-SHA256 of ``v0:{ts}:{body}``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Call:
    """One request the fake received."""

    path: str
    params: dict[str, Any]
    headers: dict[str, str]
    status: int = 200
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeSlack:
    calls: list[Call] = field(default_factory=list)
    rate_limits: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)
    """method -> Retry-After seconds of the 429s still to give."""
    failures: dict[str, list[tuple[str, str | None, Callable[[dict[str, Any]], bool] | None]]] = \
        field(default_factory=dict)
    """method -> (Slack error, only for this channel/user or None, only for calls whose
    params it holds true for or None) still to give."""
    gone_hooks: set[str] = field(default_factory=set)
    """response_url names that answer 404 (expired or used up)."""
    statuses: dict[tuple[str, str], int] = field(default_factory=dict)
    """(method, error) -> the HTTP status its failures answer with (default 200, as Slack's
    ``ok: false`` errors do)."""
    hangs: dict[str, int] = field(default_factory=dict)
    """method -> how many more calls are recorded (status 0) and then never answered until
    :meth:`stop` or :meth:`unhang`, as a Web API that accepted the connection and hangs."""
    upload_base: str | None = None
    """Where ``files.getUploadURLExternal`` sends the bytes (default: this fake's
    ``/upload/``); a closed port stands for an upload host that cannot be reached."""
    upload_statuses: list[int] = field(default_factory=list)
    """The HTTP statuses the next uploads of bytes answer with (then 200); ``hang("upload")``
    leaves them unanswered."""
    lands: dict[str, list[str | None]] = field(default_factory=dict)
    """method -> the calls (to this channel only, or any) still to be taken (a post lands,
    listed by the history) and then never answered until :meth:`release` or :meth:`stop`
    (status 0, as a hung call)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """What the conversations hold: channel, ts, thread_ts, text, metadata of each post."""
    history_scope: bool = False
    """Whether the token may read conversations (``channels:history``, ``im:history``...)."""

    def __post_init__(self) -> None:
        self._ts = itertools.count(1)
        self._files = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._released = asyncio.Event()
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.add_routes([
            web.post("/api/{method}", self._api),
            web.get("/api/{method}", self._api),
            web.post("/upload/{file_id}", self._upload),
            web.post("/webhook/{name}", self._webhook),
            web.get("/link", self._socket),
        ])
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self._released.set()  # hung requests end, or the server's cleanup waits for them
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/webhook/{name}"

    def rate_limit(self, method: str, *, times: int = 1, retry_after: int = 0,
                   target: str | None = None) -> None:
        """The next ``times`` calls of ``method`` (to the channel ``target`` only, if given)
        answer 429 with ``Retry-After``; ``"response_url"``: posts to any response_url."""
        self.rate_limits.setdefault(method, []).extend([(retry_after, target)] * times)

    def fail(self, method: str, error: str, *, times: int = 1, target: str | None = None,
             status: int = 200, when: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """The next ``times`` calls of ``method`` (to ``target`` only, and only those whose
        params ``when`` holds for, if given) fail; with ``status`` 500 (or another 5xx) as
        Slack's server errors come (``internal_error``)."""
        self.failures.setdefault(method, []).extend([(error, target, when)] * times)
        if status != 200:
            self.statuses[(method, error)] = status

    def hang(self, method: str, *, times: int = 1_000_000) -> None:
        """The next ``times`` calls of ``method`` (default: all) hang unanswered;
        ``"response_url"``: posts to any response_url; ``"upload"``: uploads of bytes."""
        self.hangs[method] = self.hangs.get(method, 0) + times

    def land(self, method: str, *, times: int = 1, target: str | None = None) -> None:
        """The next ``times`` calls of ``method`` (to the channel ``target`` only, if given)
        are taken (a post is in the conversation) but never answered: the client times out
        on a post that arrived."""
        self.lands.setdefault(method, []).extend([target] * times)

    def unhang(self) -> None:
        """Answer nothing more by hanging: later calls are answered (those hung stay so)."""
        self.hangs.clear()

    def release(self) -> None:
        """End every call left hanging, and any hung later (each answers 503)."""
        self._released.set()

    def hung(self, method: str | None = None) -> list[Call]:
        """The calls (of ``method``, or all) that were left hanging."""
        return [c for c in self.calls if c.status == 0 and
                (method is None or c.path == f"/api/{method}" or
                 (method == "response_url" and c.path.startswith("/webhook/")))]

    def _failure(self, method: str, params: dict[str, Any]) -> str | None:
        pending = self.failures.get(method) or []
        for index, (error, target, when) in enumerate(pending):
            if (target is None or target in (params.get("channel"), params.get("users"))) and (
                    when is None or when(params)):
                del pending[index]
                return error
        return None

    # -- queries --------------------------------------------------------------------------------

    def paths(self) -> list[str]:
        return [c.path for c in self.calls]

    def to(self, path: str) -> list[Call]:
        return [c for c in self.calls if c.path == path and c.status == 200]

    async def wait_for(self, path: str, count: int = 1, *, within: float = 20.0) -> list[Call]:
        """Wait until ``path`` has been answered ``count`` times (bounded; no fixed sleeps)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.to(path)) >= count)
        return self.to(path)

    # -- handlers -------------------------------------------------------------------------------

    async def _record(self, request: web.Request, params: dict[str, Any], status: int,
                      answer: dict[str, Any] | None = None) -> None:
        call = Call(request.path, params, dict(request.headers), status, answer or {})
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        if self.hangs.get(method, 0) > 0:
            self.hangs[method] -= 1
            await self._record(request, params, 0)
            await self._released.wait()
            return web.json_response({"ok": False, "error": "fake_slack_stopped"}, status=503)
        pending = self.rate_limits.get(method) or []
        limited = next((n for n, (_, target) in enumerate(pending)
                        if target is None or target == params.get("channel")), None)
        if limited is not None:
            retry_after, _ = pending.pop(limited)
            await self._record(request, params, 429)
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(retry_after)})
        landing = self.lands.get(method) or []
        taken = next((n for n, target in enumerate(landing)
                      if target is None or target == params.get("channel")), None)
        if taken is not None:
            del landing[taken]
            await self._record(request, params, 0, self._answer(method, params))
            await self._released.wait()
            return web.json_response({"ok": False, "error": "fake_slack_stopped"}, status=503)
        error = self._failure(method, params)
        if error is not None:
            status = self.statuses.get((method, error), 200)
            await self._record(request, params, 400 if status == 200 else status,
                               {"ok": False, "error": error})
            return web.json_response({"ok": False, "error": error}, status=status)
        answer = self._answer(method, params)
        await self._record(request, params, 200, answer)
        return web.json_response(answer)

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack/", "team": "Fake", "user": "jobtables",
                    "team_id": "T0FAKE", "user_id": "UBOT", "bot_id": "BBOT"}
        if method in ("chat.postMessage", "chat.update"):
            ts = params.get("ts") or f"1700000000.{next(self._ts):06d}"
            if method == "chat.postMessage":
                self.messages.append({"channel": params.get("channel"), "ts": ts,
                                      "thread_ts": params.get("thread_ts"),
                                      "text": params.get("text"),
                                      "blocks": params.get("blocks"),
                                      "metadata": params.get("metadata")})
            return {"ok": True, "channel": params.get("channel"), "ts": ts,
                    "message": {"text": params.get("text")}}
        if method in ("conversations.history", "conversations.replies"):
            return self._history(method, params)
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": "D" + str(params.get("users", "")).lstrip("U")}}
        if method == "apps.connections.open":
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}
        if method == "views.publish":
            return {"ok": True, "view": {"id": "V0HOME", "type": "home"}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": "1700000000.999999"}
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._files):04d}"
            base = self.upload_base or f"http://127.0.0.1:{self.port}/upload/"
            return {"ok": True, "file_id": file_id, "upload_url": f"{base}{file_id}"}
        if method == "files.completeUploadExternal":
            files = params.get("files")
            files = json.loads(files) if isinstance(files, str) else (files or [])
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}
        return {"ok": False, "error": "unknown_method"}

    def _history(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A conversation's messages, newest first (a thread's: its parent and replies, oldest
        first); metadata only when asked for (``include_all_metadata``), as Slack does."""
        if not self.history_scope:
            return {"ok": False, "error": "missing_scope", "needed": "channels:history"}
        channel, ts = params.get("channel"), params.get("ts")
        if method == "conversations.replies":
            found = [m for m in self.messages if m["channel"] == channel
                     and ts in (m["ts"], m["thread_ts"])]
        else:
            found = [m for m in reversed(self.messages) if m["channel"] == channel
                     and m["thread_ts"] in (None, m["ts"])]
        full = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        shown = [{"type": "message", "ts": m["ts"], "text": m["text"],
                  **({"thread_ts": m["thread_ts"]} if m["thread_ts"] else {}),
                  **({"metadata": m["metadata"]} if full and m["metadata"] else {})}
                 for m in found][: int(params.get("limit") or 100)]
        return {"ok": True, "messages": shown, "has_more": False}

    async def _upload(self, request: web.Request) -> web.Response:
        body = await request.read()
        params = {"bytes": len(body), "head": body[:8]}
        if self.hangs.get("upload", 0) > 0:
            self.hangs["upload"] -= 1
            await self._record(request, params, 0)
            await self._released.wait()
            return web.Response(status=503, text="fake_slack_stopped")
        status = self.upload_statuses.pop(0) if self.upload_statuses else 200
        await self._record(request, params, status)
        if status != 200:
            return web.Response(status=status, text="upload failed")
        return web.Response(text="OK - " + str(len(body)))

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        """Socket Mode: say hello, then answer pings until the client goes away."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await self._record(request, {}, 200)
        await ws.send_json({"type": "hello", "num_connections": 1,
                            "debug_info": {"host": "fake"}, "connection_info": {"app_id": "A0"}})
        async for _ in ws:
            pass
        return ws

    async def _webhook(self, request: web.Request) -> web.Response:
        if self.hangs.get("response_url", 0) > 0:  # hang("response_url"): every hook hangs
            self.hangs["response_url"] -= 1
            await self._record(request, await request.json(), 0)
            await self._released.wait()
            return web.Response(status=503, text="fake_slack_stopped")
        limits = self.rate_limits.get("response_url") or []
        if limits:  # rate_limit("response_url"): the next posts to any response_url
            retry_after, _ = limits.pop(0)
            await self._record(request, await request.json(), 429)
            return web.Response(status=429, text="rate_limited",
                                headers={"Retry-After": str(retry_after)})
        if request.match_info["name"] in self.gone_hooks:
            await self._record(request, await request.json(), 404)
            return web.Response(status=404, text="no_active_hooks")
        await self._record(request, await request.json(), 200)
        return web.Response(text="ok")


async def _params(request: web.Request) -> dict[str, Any]:
    """Query string, form and JSON body merged (slack_sdk uses all three, per method)."""
    merged: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        merged.update(await request.json())
    else:
        form = await request.post()
        merged.update({k: v for k, v in form.items() if isinstance(v, str)})
    return merged


# -- signing requests to the bot, as Slack does ------------------------------------------------

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def signature(body: str, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(body: str, *, timestamp: int | None = None, secret: str = SIGNING_SECRET,
                   content_type: str = "application/x-www-form-urlencoded") -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature(body, ts, secret),
            "Content-Type": content_type}


def command_body(command: str, text: str, *, user: str, response_url: str,
                 channel: str = "C0SWEEP") -> str:
    return urllib.parse.urlencode({
        "token": "legacy-verification-token", "team_id": "T0FAKE", "team_domain": "fake",
        "channel_id": channel, "channel_name": "ops", "user_id": user, "user_name": user.lower(),
        "command": command, "text": text, "api_app_id": "A0FAKE", "is_enterprise_install": "false",
        "response_url": response_url, "trigger_id": f"trigger-{time.monotonic_ns()}",
    })


def action_body(action_id: str, value: str, *, user: str, response_url: str,
                channel: str = "D0ALICE", message_ts: str = "1700000000.000001",
                blocks: list[dict[str, Any]] | None = None) -> str:
    payload = {
        "type": "block_actions", "team": {"id": "T0FAKE", "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE", "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
                      "is_ephemeral": False},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "channel": {"id": channel, "name": "directmessage"},
        "message": {"type": "message", "ts": message_ts, "text": "Collapse", "blocks":
                    blocks or []},
        "response_url": response_url,
        "actions": [{"action_id": action_id, "block_id": "collapse_actions", "value": value,
                     "type": "button", "action_ts": str(time.time()),
                     "text": {"type": "plain_text", "text": action_id}}],
    }
    return "payload=" + urllib.parse.quote(json.dumps(payload))
