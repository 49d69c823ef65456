"""The bot over real HTTP: signed slash commands in, answers out through the fake Slack."""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text
from tests.bot.conftest import Harness, make_store, running_bot
from tests.bot.fake_slack import FakeSlack, action_body, command_body, signed_headers


async def test_jobs_is_answered_with_code_block_tables(harness: Harness) -> None:
    """/jobs is acked with 200 and answered via response_url with tables in code blocks."""
    status, hook = await harness.command("/jobs")
    assert status == 200
    ack, reply = await harness.slack.wait_for(hook, 2)  # "Sweeping 1 cluster…", then tables
    assert ack.params["text"] == "Sweeping 1 cluster…"
    text = blocks_text(reply.params["blocks"])
    assert "```" in text
    assert "┌" in text and "rl-ppo-llama-8b" in text and "sft-mistral-7b" in text
    assert reply.params["response_type"] == "ephemeral"
    assert harness.sweeper.sweeps == 1


async def test_second_jobs_comes_from_the_cache_with_its_age(harness: Harness) -> None:
    """A second /jobs within cache_seconds reuses the sweep and says how old it is."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)  # the live sweep's ack and its answer
    harness.clock.advance(42)
    _, second = await harness.command("/jobs", "rl")
    (reply,) = await harness.slack.wait_for(second)
    text = blocks_text(reply.params["blocks"])
    assert "cached 42 s ago" in text
    assert "rl-ppo-llama-8b" in text and "sft-mistral-7b" not in text
    assert harness.sweeper.sweeps == 1


async def test_stale_cache_runs_a_new_sweep(harness: Harness) -> None:
    """Past cache_seconds the answer comes from a new sweep (near miss: 60 s is stale)."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    harness.clock.advance(60)
    _, second = await harness.command("/jobs")
    _, reply = await harness.slack.wait_for(second, 2)
    assert "live sweep" in blocks_text(reply.params["blocks"])
    assert harness.sweeper.sweeps == 2


async def test_forged_signature_is_rejected_and_runs_nothing(harness: Harness) -> None:
    """A request signed with the wrong secret gets 401 and no sweep, no reply."""
    status, _ = await harness.command("/jobs", secret="not-the-signing-secret")
    assert status == 401
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 0
    assert not [c for c in harness.slack.calls if c.path.startswith("/webhook")]


async def test_replayed_old_timestamp_is_rejected(harness: Harness) -> None:
    """A correctly signed request whose timestamp is over 5 minutes old gets 401."""
    status, _ = await harness.command("/jobs", timestamp=int(time.time()) - 301)
    assert status == 401
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 0


async def test_a_copy_of_a_signed_command_within_the_window_is_rejected(
        harness: Harness) -> None:
    """The same signed `/jobs` played back a second later (a captured request: its timestamp
    still within five minutes, so its signature still checks): the first runs, the copy gets
    401 and runs nothing. Near miss: the command typed again (Slack signs it anew) runs."""
    body = command_body("/jobs", "", user="UALICE",
                        response_url=harness.slack.response_url("first"))
    headers = signed_headers(body)
    assert (await harness.post(body, headers))[0] == 200
    await harness.slack.wait_for("/webhook/first", 2)
    await harness.bot.tasks.drain()
    status, _ = await harness.post(body, headers)
    await harness.bot.tasks.drain()
    assert status == 401
    assert harness.sweeper.sweeps == 1 and len(harness.slack.to("/webhook/first")) == 2
    status, hook = await harness.command("/jobs")
    assert status == 200
    await harness.slack.wait_for(hook)


async def test_a_copy_of_a_signed_press_is_rejected_by_another_replica(
        slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
        redis_server: str) -> None:
    """A captured keep_running press played back to another replica (one load balancer, one
    Redis): 401 there, nothing run, nothing audited twice; the replicas share what they saw."""
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweeper, clock) as a, \
                running_bot(slack, other, sweeper, clock) as b:
            await scheduled_sweep(a.bot, 0)  # the collapse is alerted to alice
            where = a.alert_post()
            body = action_body("keep_running", "alpha:4242", user="UALICE",
                               response_url=slack.response_url("kept"),
                               channel=where["channel"], message_ts=where["ts"],
                               blocks=where["blocks"])
            headers = signed_headers(body)
            assert (await a.post(body, headers))[0] == 200
            await a.bot.tasks.drain()
            status, _ = await b.post(body, headers)
            await b.bot.tasks.drain()
            audit = await store.audit_entries()
    finally:
        await other.aclose()
    assert status == 401
    assert [(e["actor"], e["outcome"]) for e in audit] == [("UALICE", "kept running")]


@pytest.mark.parametrize(("stamp", "signature"), [
    ("abc", "v0=deadbeef"), ("", "v0=deadbeef"), ("1e3", "v0=deadbeef"), (" 12", "v0=dead"),
    ("-1", "v0=dead"), ("9" * 40, "v0=dead"), (str(int(time.time())), "v0=\xff\xfe"),
])
async def test_malformed_signature_headers_get_401_not_500(
        harness: Harness, stamp: str, signature: str) -> None:
    """A timestamp that is not decimal seconds, or a non-ASCII signature, from anyone: 401 as
    for a bad signature, with nothing logged as an error and nothing run (Bolt's verifier
    raised on them: a 500 and a trace in the log per request)."""
    body = command_body("/jobs", "", user="UALICE", response_url=harness.slack.response_url("x"))
    with capture_logs() as logs:
        status, _ = await harness.post(body, {
            "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature,
            "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 401
    assert not [e for e in logs if e["log_level"] in ("error", "exception")]
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 0
    assert not [c for c in harness.slack.calls if c.path.startswith("/webhook")]


async def test_shell_injection_in_job_id_runs_nothing(harness: Harness, tmp_path: Path) -> None:
    """`/job 1;touch <file>` gets an ephemeral error; no sweep runs and no file appears."""
    target = tmp_path / "pwned"
    status, hook = await harness.command("/job", f"1;touch {target}")
    assert status == 200
    (reply,) = await harness.slack.wait_for(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert "is not a job id" in reply.params["text"]
    assert harness.sweeper.sweeps == 0
    assert not target.exists()


async def test_unknown_bucket_is_a_short_ephemeral_error(harness: Harness) -> None:
    """`/jobs gpu` names the valid buckets and sweeps nothing."""
    _, hook = await harness.command("/jobs", "gpu")
    (reply,) = await harness.slack.wait_for(hook)
    assert "rl, sft, datagen, eval, other" in reply.params["text"]
    assert harness.sweeper.sweeps == 0


async def test_help_answers_usage(harness: Harness) -> None:
    """`/jobs help` answers the usage text without sweeping; its placeholders are escaped, as
    Slack reads a bare ``<id>`` as a link (CONTRACT §7: only the bot's own mentions and links)."""
    _, hook = await harness.command("/jobs", "help")
    (reply,) = await harness.slack.wait_for(hook)
    assert "/job &lt;cluster&gt;:&lt;id&gt;" in reply.params["text"]
    assert "<" not in reply.params["text"] and ">" not in reply.params["text"]
    assert harness.sweeper.sweeps == 0


async def test_job_detail_with_chart_uploaded_to_dm(harness: Harness) -> None:
    """`/job alpha:4242` answers the detail and uploads a PNG chart via files_upload_v2."""
    _, hook = await harness.command("/job", "alpha:4242")
    (reply,) = await harness.slack.wait_for(hook)
    assert "rl-grpo-qwen-7b" in blocks_text(reply.params["blocks"])
    (done,) = await harness.slack.wait_for("/api/files.completeUploadExternal")
    assert done.params["channel_id"] == "DALICE"
    (upload,) = harness.slack.to("/upload/F0001")
    assert upload.params["head"] == b"\x89PNG\r\n\x1a\n"
    assert harness.slack.to("/api/files.getUploadURLExternal")


async def test_an_upload_host_out_of_reach_leaves_the_answer_alone(harness: Harness) -> None:
    """The chart's upload cannot reach its host (the upload URL's port is closed): the
    `/job` answer stands alone, no "Something went wrong" follows it (the upload's network
    error was not caught), and the failure is counted."""
    harness.slack.upload_base = "http://127.0.0.1:1/upload/"
    _, hook = await harness.command("/job", "alpha:4242")
    await harness.slack.wait_for("/api/files.getUploadURLExternal")
    await harness.bot.tasks.drain()
    replies = harness.slack.to(hook)
    assert len(replies) == 1 and "rl-grpo-qwen-7b" in blocks_text(replies[0].params["blocks"])
    assert 'method="files.upload"' in harness.bot.telemetry.render().decode()


async def test_unknown_job_is_an_ephemeral_error(harness: Harness) -> None:
    """`/job 999` that no cluster reports gets a not-found line."""
    _, hook = await harness.command("/job", "999")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no job 999" in reply.params["text"]


@pytest.mark.parametrize(("text", "expected"), [
    ("zeta:4242", "no cluster named 'zeta'; configured: alpha"),
    ("alph:4242", "no cluster named 'alph'"),
])
async def test_unknown_cluster_is_an_ephemeral_error_before_any_sweep(
    harness: Harness, text: str, expected: str,
) -> None:
    """`/job zeta:4242` for a cluster not in the roster names the known ones and sweeps nothing."""
    _, hook = await harness.command("/job", text)
    (reply,) = await harness.slack.wait_for(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert expected in reply.params["text"]
    assert len(reply.params["text"]) < 200
    assert harness.sweeper.sweeps == 0


@pytest.mark.parametrize("text", ["&lt;rl&gt;", "rl&amp;sft", "<!channel>", "<#C0X|general>"])
async def test_slack_escaped_bucket_text_is_a_short_error(harness: Harness, text: str) -> None:
    """Slack-escaped or mention text after /jobs is refused in one line; nothing is swept."""
    _, hook = await harness.command("/jobs", text)
    (reply,) = await harness.slack.wait_for(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert "unknown bucket" in reply.params["text"] and len(reply.params["text"]) < 200
    assert "<!channel>" not in reply.params["text"] and "<@" not in reply.params["text"]
    assert harness.sweeper.sweeps == 0


async def test_healthz_and_metrics(harness: Harness) -> None:
    """/healthz is 200 in HTTP mode with Redis up; /metrics exposes the bot's counters."""
    status, body = await harness.get("/healthz")
    assert status == 200 and '"redis": "ok"' in body
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook, 2)  # the ack, then the answer of the live sweep
    status, text = await harness.get("/metrics")
    assert status == 200
    assert 'jobtables_sweep_duration_seconds_count{cluster="alpha"} 1.0' in text
    assert 'jobtables_commands_total{command="/jobs",source="live"} 1.0' in text


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded",
                                          "application/x-www-form-urlencoded; charset=bogus"])
async def test_a_body_no_charset_reads_gets_401_not_500(harness: Harness,
                                                        content_type: str) -> None:
    """Well-formed headers, a body that is not UTF-8 (or a charset Python does not know):
    401 from anyone, nothing logged as an error (reading it raised: a 500 and a trace)."""
    stamp = str(int(time.time()))
    with capture_logs() as logs:
        async with harness.http.post(harness.url + "/slack/events", data=b"\xff\xfe token=x",
                                     headers={"X-Slack-Request-Timestamp": stamp,
                                              "X-Slack-Signature": "v0=00",
                                              "Content-Type": content_type}) as response:
            status = response.status
    assert status == 401
    assert not [e for e in logs if e["log_level"] in ("error", "exception")]
    assert harness.sweeper.sweeps == 0


@pytest.mark.parametrize(("body", "content_type"), [
    ("payload=%7Bnot", "application/x-www-form-urlencoded"),
    ("payload=xyz", "application/json"),
    ("{not json", "application/json"),
    ("[1, 2]", "application/json"),
])
async def test_an_unsigned_body_that_does_not_parse_gets_401_not_500(
        harness: Harness, body: str, content_type: str) -> None:
    """A wrong signature over a body Bolt cannot parse (a form payload or a JSON body that is
    not JSON): 401, as any wrong signature, checked before the body is parsed (Bolt parsed
    first: a 500 and a logged trace for any sender); nothing run, nothing logged as an
    error. Signed by Slack's secret, the same body is a 400 at worst, never a 500."""
    for secret, allowed in (("wrong", {401}), (None, {200, 400, 404})):
        headers = (signed_headers(body, secret=secret, content_type=content_type) if secret
                   else signed_headers(body, content_type=content_type))
        with capture_logs() as logs:
            status, _ = await harness.post(body, headers)
        assert status in allowed, (secret, status)
        assert not [e for e in logs if e["log_level"] in ("error", "exception")]
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 0


_PRESS = {"type": "block_actions", "team": {"id": "T0FAKE"}, "user": {"id": "UALICE"},
          "response_url": "",
          "container": {"type": "message", "message_ts": "1700000000.000001",
                        "channel_id": "D0ALICE"},
          "actions": [{"action_id": "cancel_salvage", "value": "alpha:4242", "type": "button"}]}


def _without(key: str) -> dict[str, object]:
    return {k: v for k, v in _PRESS.items() if k != key}


@pytest.mark.parametrize("payload", [
    pytest.param({**_PRESS, "actions": []}, id="no-action"),
    pytest.param({**_PRESS, "actions": "cancel_salvage"}, id="actions-a-string"),
    pytest.param({**_PRESS, "actions": ["cancel_salvage"]}, id="action-a-string"),
    pytest.param({**_PRESS, "actions": [{"value": "alpha:4242"}]}, id="no-action-id"),
    pytest.param({**_PRESS, "actions": [{"action_id": "cancel_salvage", "value": 4242}]},
                 id="value-a-number"),
    pytest.param(_without("user"), id="no-user"),
    pytest.param({**_PRESS, "user": "UALICE"}, id="user-a-string"),
    pytest.param({**_PRESS, "user": {}}, id="user-without-id"),
    pytest.param({**_PRESS, "container": "D0ALICE"}, id="container-a-string"),
    pytest.param({**_PRESS, "team": "T0FAKE"}, id="team-a-string"),
    pytest.param({**_PRESS, "message": {"blocks": "none"}}, id="blocks-a-string"),
    pytest.param(_without("response_url"), id="no-response-url"),
    pytest.param({**_PRESS, "response_url": 5}, id="response-url-a-number"),
    pytest.param({"type": "event_callback", "event": "app_home_opened"}, id="event-a-string"),
    pytest.param({"type": "event_callback", "event": {"type": "app_home_opened",
                                                      "user": ["UALICE"]}},
                 id="event-user-a-list"),
])
async def test_a_signed_malformed_interaction_payload_gets_400_and_runs_nothing(
        harness: Harness, payload: dict[str, object]) -> None:
    """Validly signed, yet not the shape Slack sends (no action, no user, a field of the wrong
    type): a clean 400 and a warning, never a 500 nor a trace logged as an error (Bolt's
    matchers and the handlers indexed it); nothing runs, and the bot still answers."""
    if payload.get("type") == "block_actions" and payload.get("response_url") == "":
        payload = {**payload, "response_url": harness.slack.response_url("malformed")}
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    with capture_logs() as logs:
        status, _ = await harness.post(body, signed_headers(body))
        await harness.bot.tasks.drain()
    assert status == 400
    assert not [e for e in logs if e["log_level"] in ("error", "exception", "critical")]
    assert harness.sweeper.sweeps == 0 and harness.sweeper.cancels == []
    assert harness.slack.calls == []
    _, hook = await harness.command("/jobs", "help")  # nothing lost: the next one is answered
    await harness.slack.wait_for(hook)


@pytest.mark.parametrize("body", [
    pytest.param("command=%2Fjobs&text=&response_url=http%3A%2F%2F127.0.0.1%3A9%2Fwebhook%2Fx",
                 id="no-user"),
    pytest.param("command=%2Fjobs&user_id=UALICE&text=", id="no-response-url"),
])
async def test_a_signed_command_without_its_user_or_response_url_gets_400(
        harness: Harness, body: str) -> None:
    """A slash command lacking the invoker or the response_url (Slack always sends both):
    400, nothing run, nothing logged as an error (it failed after the ack, with a trace)."""
    with capture_logs() as logs:
        status, _ = await harness.post(body, signed_headers(body))
        await harness.bot.tasks.drain()
    assert status == 400
    assert not [e for e in logs if e["log_level"] in ("error", "exception", "critical")]
    assert harness.sweeper.sweeps == 0 and harness.slack.calls == []


async def test_a_signed_event_the_bot_does_not_read_is_not_refused_for_its_fields(
        harness: Harness) -> None:
    """An event of another kind whose ``user`` is an object (``team_join``, ``user_change``):
    only the event listened to (``app_home_opened``) is read field by field, so this one is
    not a 400 (Slack retries those and disables a subscription that keeps failing)."""
    body = json.dumps({"type": "event_callback", "team_id": "T0FAKE",
                       "event": {"type": "team_join", "user": {"id": "U1", "name": "x"}}})
    status, _ = await harness.post(body, signed_headers(body, content_type="application/json"))
    assert status != 400 and status < 500


def test_a_jobset_ids_upload_name_holds_no_slash() -> None:
    """``/job beta:jobset/rl-dup`` uploads ``beta-jobset_rl-dup.txt``/``.png``: a JobSet's id
    (``jobset/NAME``, 9290fb7) put a ``/`` in the upload's file name."""
    from bot.slash_answers import upload_stem

    assert upload_stem("beta", "jobset/rl-dup") == "beta-jobset_rl-dup"
    assert upload_stem("alpha", "4242_3") == "alpha-4242_3"


async def test_every_ephemeral_reply_is_sent_as_verbatim_blocks(harness: Harness) -> None:
    """Ephemeral replies built as text only (usage, notify, errors, a failed deep probe; "No
    deep probe: NAME is not an RL run" quotes a job's name outside code) carry their text as
    verbatim sections too: Slack always auto-links a message's top-level text."""
    from tests.bot.test_home import mrkdwn_objects

    hooks = [(await harness.command("/jobs", text))[1]
             for text in ("help", "notify off", "bogus")]
    hooks.append((await harness.command("/job", "999"))[1])
    hooks.append((await harness.press("deep_probe", "alpha:4300", user="UALICE"))[1])
    await harness.bot.tasks.drain()
    replies = [r for hook in hooks for r in await harness.slack.wait_for(hook)]
    assert len(replies) == 5, [r.params["text"][:80] for r in replies]
    for reply in replies:
        objects = mrkdwn_objects(reply.params.get("blocks"))
        assert objects and all(o["verbatim"] is True for o in objects), reply.params["text"]
        assert "\n".join(o["text"] for o in objects) == reply.params["text"]
