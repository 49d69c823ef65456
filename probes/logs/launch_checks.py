"""Eval/datagen launch checks read from a log: tunnel, sandbox api_base, engine 200s, auth.

Policy (seed, Eval section): the Infra column shows whether the tunnel authenticated and
carries traffic, whether the sandbox ``api_base`` points at a public URL rather than an
internal address, whether the engine keeps answering POSTs with 200, and whether auth
failures repeat. Each check is ``None`` until the log says something about it; the latest
tunnel event wins (cloudflared retries, then registers: its refusals before that are over,
not counted as auth failures). cloudflared's ERR line for a request
its client cancelled (``context canceled``: an agent's LLM call ended at its timeout) is
traffic through the tunnel, not a failure of it. An ``api_base`` is internal when its
host is a private, loopback or link-local IP, ``localhost``, a cluster-local service name, or a
dotless hostname (which cannot be a public URL). The engine's last 200 is timed on the log's
own clock (``probes.logs.clock``): here from the 200 line's own stamp, a year-less one placed
by the file's mtime or the 200 before it; ``probes.logs.parse`` then reads the whole log's
clock at ``last_ok_line``, which also times a 200 line that carries no stamp. Running-request
snapshots (vLLM ``Running: N reqs``, SGLang ``#running-req: N``) are timed on the same clock:
``engine_zero_since`` is the stamp of the first snapshot of the current run of zeros, so "zero
running requests for 10+ minutes" is a span, never one snapshot. An engine logs its stats
only while it has work: SGLang a batch line (a ``Prefill batch`` as it admits requests, a
``Decode batch`` every ``decode_log_interval`` steps), vLLM a stats line every 10 s, and one
idle line (zero running, zero throughput) before it goes quiet (``LoggingStatLogger``'s "avoid
log noise on an idle production system"). So silence after a line that shows work is an engine
that stopped (idle SGLang, or a dead or wedged engine): ``engine_busy_at`` is that line's
stamp. A ``Prefill batch``'s ``#running-req`` (the batch running beside the ``#new-seq`` it
admits) counts those too. The last
:data:`RECENT_RESPONSES` engine answers are kept to tell a 5xx burst from one stray error.
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from probes.logs.clock import LogClock
from probes.models import InfraSignals

_TUNNEL_ERROR = re.compile(
    r"(?i:\b(?:tunnel|cloudflared|ngrok)\b.*\b(?:error|failed|failure|unauthori[sz]ed|refused"
    r"|lost|disconnected|(?:not|never) (?:connected|established|ready))\b)"
    r"|\bERR_NGROK_\d+|\bERR\b.*\b(?:connIndex|edge)\b"
)
_TUNNEL_CANCELLED = re.compile(
    r"\berror=\"(?:Incoming request ended abruptly: )?context canceled\""
    r"|\berror=\"stream \d+ canceled by remote\b"
)
"""cloudflared's ERR line for a proxied request its client ended early (an agent's LLM call
cancelled at its timeout): traffic through the tunnel, never a tunnel failure."""
_TUNNEL_OK = re.compile(
    r"\bRegistered tunnel connection\b|\bstarted tunnel\b"
    r"|(?i:\btunnel\b.*\b(?:connected|established|ready|authenticated)\b)"
)
_API_BASE = re.compile(
    r"(?:(?i:\b(?:[a-z][a-z0-9]*_)*api_base)|\b(?:OPENAI|LLM|ANTHROPIC|HOSTED_VLLM|VLLM)_BASE_URL)"
    r"['\"]?\s*[=:]\s*['\"]?(?P<url>[^\s'\",}\]]+)"
)
"""The agent's endpoint under the names Harbor's agents read it from: ``api_base``, LiteLLM's
per-provider ``<PROVIDER>_API_BASE`` (``HOSTED_VLLM_API_BASE`` for a ``hosted_vllm/`` model),
and the model clients' ``*_BASE_URL`` (openhands' ``LLM_BASE_URL``, claude-code's
``ANTHROPIC_BASE_URL``); other ``*_BASE_URL`` (``WANDB_BASE_URL``) name no model endpoint."""
_ENGINE_POST = re.compile(
    r"\"POST /v1/(?:chat/completions|completions|responses|messages)\S* HTTP/[\d.]+\" "
    r"(?P<code>\d{3})"
)
_RUNNING = re.compile(r"\bRunning: (?P<n>\d+) reqs\b|#running-req: (?P<sglang>\d+)")
_SGLANG_BATCH = re.compile(r"\b(?:Prefill|Decode) batch\b")
_NEW_SEQ = re.compile(r"\bPrefill batch\b.*?#new-seq: (?P<n>\d+)")
_GENERATING = re.compile(r"\bAvg generation throughput: (?P<v>[\d.]+) tokens/s"
                         r"|\bgen throughput \(token/s\): (?P<s>[\d.]+)")
"""The stats line's generation rate, beside its running count (vLLM, SGLang)."""
MARK_SPACING = timedelta(minutes=2)
MARKS = 96
"""Stamped engine lines kept as (line, stamp) marks, one per :data:`MARK_SPACING` at most: the
newest 96 span over three hours, where a stall window is minutes to an hour or two."""
RECENT_RESPONSES = 20
"""Engine answers kept for the 5xx-burst check."""
_AUTH_FAILURE = re.compile(
    r"\b401 Unauthorized\b|\b403 Forbidden\b|(?i:authentication failed|invalid api key)"
    r"|\bAuthenticationError\b|(?i:api key not found|token validation failed)"
)
"""An auth failure in the log; with the sandbox providers' own words (Daytona's ``Failed to
create sandbox: API key not found``, Modal's ``Token validation failed``)."""
NEEDLES = (
    *("tunnel", "cloudflared", "ngrok", "err", "api_base", "_base_url", "post /v", "running: ",
      "#running-req: "),
    *("unauthorized", "forbidden", "authentication", "api key", "token validation"),
)
"""Every match of a check's regex above holds one of these (lower-cased and digit-free, for
``probes.logs.prefilter``), so a line holding none of them changes no check."""
_HOSTNAME = re.compile(r"[\w.-]+|[0-9A-Fa-f:.]+")
_CLUSTER_SUFFIXES = (".svc", ".svc.cluster.local", ".cluster.local", ".internal", ".local")


def is_internal_url(url: str) -> bool | None:
    """Whether ``url`` points at an internal address; ``None`` when it names no host."""
    try:
        host = urlsplit(url if "://" in url else f"//{url}").hostname
    except ValueError:
        return None
    if not host or _HOSTNAME.fullmatch(host) is None:
        return None
    host = host.rstrip(".").lower()
    if host == "localhost" or host.endswith(_CLUSTER_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return address.is_private or address.is_loopback or address.is_link_local


class LaunchChecks:
    """Accumulates launch-check evidence line by line; ``signals()`` gives the model."""

    def __init__(self, mtime: datetime | None = None) -> None:
        self.tunnel_ok: bool | None = None
        self.api_base: str | None = None
        self.engine_ok: int | None = None
        self.last_ok_at: datetime | None = None
        self.last_ok_line: int | None = None
        self.clock = LogClock(mtime)
        self.running: int | None = None
        self.zero_since: datetime | None = None
        self.marks: deque[tuple[int, datetime]] = deque(maxlen=MARKS)
        """(line, stamp) of stamped engine lines (stats, heartbeat), spaced (``mark``)."""
        self.stuck_since: datetime | None = None
        """The first snapshot of the current run with requests running at 0 tokens/s."""
        self.busy_at: datetime | None = None
        """The stamp of the latest engine line showing work (an engine logs none while idle,
        or one idle line first); ``None`` after vLLM's idle line."""
        self.recent: deque[bool] = deque(maxlen=RECENT_RESPONSES)
        """Whether each of the last engine answers was a 5xx."""
        self.auth_failures = 0
        self.tunnel_auth_failures = 0
        """Of ``auth_failures``, the tunnel's own (cloudflared's ``error="Unauthorized: ..."``)
        since it last registered or carried a request (the latest tunnel event wins)."""
        self.engine_auth_failures = 0
        """Of ``auth_failures``, the engine's own refusals (its access log's 401/403 answers:
        ``--api-key`` set and the agents sending another key), until :data:`RECENT_RESPONSES`
        answers in a row hold none (the key fixed: those refusals are over)."""
        self.engine_auth_streak = 0
        """Engine answers since its last 401/403."""

    def feed(self, text: str, low: str | None, line_no: int) -> None:
        """Read line ``line_no``, prefix-stripped (``low`` is its lower-case form, if made)."""
        low = text.lower() if low is None else low
        tunnel_auth = False
        if "tunnel" in low or "cloudflared" in low or "ngrok" in low or "err" in low:
            if "cancel" in low and _TUNNEL_CANCELLED.search(text):
                self._tunnel_up()  # a request went through; its client gave up on it
            elif _TUNNEL_ERROR.search(text):
                self.tunnel_ok = False
                # cloudflared refusing the tunnel's credentials: 'error="Unauthorized: Invalid
                # tunnel secret"' / '"Unauthorized: Failed to get tunnel"', retried in a loop
                tunnel_auth = "unauthori" in low or _AUTH_FAILURE.search(text) is not None
                self.tunnel_auth_failures += tunnel_auth
            elif _TUNNEL_OK.search(text):
                self._tunnel_up()
        if "api_base" in low or "_base_url" in low:
            base = _API_BASE.search(text)
            if base is not None and base.group("url").lower() not in {"none", "null", "nil"}:
                self.api_base = base.group("url")
        if "post /v1/" in low and (post := _ENGINE_POST.search(text)) is not None:
            self._engine(post.group("code"), text, line_no)
        if ("running: " in low or "#running-req: " in low) and (
            running := _RUNNING.search(text)
        ) is not None:
            found = _GENERATING.search(text)
            rate = float(found.group("v") or found.group("s")) if found else None
            count = int(running.group("n") or running.group("sglang"))
            batch = running.group("sglang") is not None and _SGLANG_BATCH.search(text)
            if batch:
                admitted = _NEW_SEQ.search(text)
                count += int(admitted.group("n")) if admitted else 0
            # SGLang logs batches only while it has requests; vLLM's stats line shows work
            # unless it is the idle one it logs before going quiet
            self._running(count, text, rate, line_no,
                          busy=bool(batch) or count > 0 or (rate or 0.0) > 0)
        if tunnel_auth:
            self.auth_failures += 1
        elif any(n in low for n in ("401", "403", "authentication", "api key",
                                    "token validation")):
            self.auth_failures += bool(_AUTH_FAILURE.search(text))

    def _tunnel_up(self) -> None:
        """The tunnel registered or carried a request: its credentials are accepted now, so
        the refusals before (cloudflared's retry loop at launch) are over, not repeating."""
        self.tunnel_ok = True
        self.auth_failures -= self.tunnel_auth_failures
        self.tunnel_auth_failures = 0

    def mark(self, line_no: int, stamp: datetime | None) -> None:
        """Keep a stamped line as a mark, at most one per :data:`MARK_SPACING`: what times a
        run's unstamped last step (:func:`quiet_since`)."""
        if stamp is not None and (not self.marks or stamp - self.marks[-1][1] >= MARK_SPACING):
            self.marks.append((line_no, stamp))

    def _running(self, count: int, text: str, rate: float | None, line_no: int, *,
                 busy: bool) -> None:
        stamp = self.clock.read(text)
        self.mark(line_no, stamp)
        self.busy_at = (stamp or self.busy_at) if busy else None
        if count == 0 or rate is None or rate > 0:
            self.stuck_since = None
        elif self.stuck_since is None:
            self.stuck_since = stamp  # the first stuck snapshot of this run
        if count != 0:
            self.zero_since = None
        elif self.running != 0 or self.zero_since is None:
            self.zero_since = stamp  # the first zero of this run (untimed: no span known)
        self.running = count

    def _engine(self, code: str, text: str, line_no: int) -> None:
        self.engine_ok = self.engine_ok or 0
        self.recent.append(code.startswith("5"))
        if code in ("401", "403"):
            self.engine_auth_failures += 1
            self.engine_auth_streak = 0
        else:
            self.engine_auth_streak += 1
            if self.engine_auth_streak >= RECENT_RESPONSES and self.engine_auth_failures:
                self.auth_failures -= self.engine_auth_failures
                self.engine_auth_failures = 0
        if code != "200":
            return
        self.engine_ok += 1
        self.last_ok_line = line_no
        stamp = self.clock.read(text)
        if stamp is not None and (self.last_ok_at is None or stamp > self.last_ok_at):
            self.last_ok_at = stamp

    def signals(self) -> InfraSignals:
        """The launch checks as facts."""
        return InfraSignals(
            tunnel_ok=self.tunnel_ok,
            api_base=self.api_base,
            api_base_internal=is_internal_url(self.api_base) if self.api_base else None,
            engine_ok_requests=self.engine_ok,
            last_engine_ok_at=self.last_ok_at,
            auth_failures=self.auth_failures,
            tunnel_auth_failures=self.tunnel_auth_failures,
            engine_auth_failures=self.engine_auth_failures,
            engine_running_requests=self.running,
            engine_zero_since=self.zero_since if self.running == 0 else None,
            engine_stuck_since=self.stuck_since,
            engine_busy_at=self.busy_at,
            engine_5xx_recent=sum(self.recent),
            engine_recent_responses=len(self.recent),
        )


def quiet_since(marks: Sequence[tuple[int, datetime]], last_step_line: int | None,
                last_step_at: datetime | None) -> datetime | None:
    """The first mark after the last step's line when that step has no stamp of its own: the
    step was logged before it, so it is at least that old (a mark skipped for its spacing only
    makes the bound later, never earlier)."""
    if last_step_line is None or last_step_at is not None:
        return None
    return next((stamp for line, stamp in marks if line > last_step_line), None)
