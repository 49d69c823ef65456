"""The collapse DM and its Cancel & salvage button name the salvage the recommendation names.

Found after 7b0419f7 (the recommendation names the last banked checkpoint BEFORE the collapse
began): a SkyRL run (tests/fixtures/skyrl-rebuilt/console_v03_collapse.log, the real console
format; saves global_step_10/20/30) reads "salvage banked step 10 (the last before the collapse
began at step 20)", but its DM's header still said "collapse at step 30; banked checkpoint:
step 30" and the Cancel & salvage confirm "Banked step: 30": the newest save, the collapsed
one. The user pressing the button must see the target the recommendation names, or that no
banked checkpoint is safe; the no-kill recommendation likewise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.store import RedisStore
from probes.logs.parse import parse_log
from probes.models import CheckpointListing, JobFacts, JobState
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.report.factories import judge, log, record

LOG = Path(__file__).resolve().parents[1] / "fixtures/skyrl-rebuilt/console_v03_collapse.log"


def _row(saves: tuple[int, ...]) -> JobDetail:
    """The judged row of the real SkyRL console log (collapse at 30, begun at 20)."""
    summary = parse_log(LOG.read_bytes()).model_copy(update={"last_timestamp": None})
    facts = JobFacts(record=record("rl-skyrl", job_id="4242", state=JobState.RUNNING),
                     log=log(path="/w/4242.out"), summary=summary,
                     checkpoints=CheckpointListing(steps=saves))
    row = judge(facts)
    assert row.collapse_step == 30 and row.report.banked_step == max(saves)
    return row


def _blocks(call: Any) -> list[dict[str, Any]]:
    blocks = call.params["blocks"]
    return json.loads(blocks) if isinstance(blocks, str) else blocks


def _confirm(blocks: list[dict[str, Any]]) -> str:
    (cancel,) = [e for b in blocks if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == "cancel_salvage"]
    return str(cancel["confirm"]["text"]["text"])


async def _posted(slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
                  clock: FakeClock, *, row: JobDetail, **slack_config: Any,
                  ) -> tuple[dict[str, Any], Any]:
    """The alert the bot posts for ``row``, and the running harness's context to press in."""
    config = make_config(prefix, tmp_path, **slack_config)
    sweeper = FakeSweeper(make=lambda: sweep_result([row]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([row], config) == ["alpha:4242"]
        (posted,) = slack.to("/api/chat.postMessage")
        where = {"channel": posted.answer["channel"], "ts": posted.answer["ts"],
                 "blocks": _blocks(posted)}
        if slack_config.get("no_kill"):
            return where, None
        _, _hook = await h.press("cancel_salvage", "alpha:4242", user="UALICE",
                                 blocks=where["blocks"], channel=where["channel"],
                                 ts=where["ts"])
        await h.bot.tasks.drain()
        assert sweeper.cancels == [("alpha", "4242")]
        return where, slack.to("/api/chat.update")[-1]


async def test_the_dm_and_its_cancel_name_the_save_before_the_collapse(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Saves at 10, 20, 30; the collapse began at 20: the header, the confirm dialog and the
    cancelled line all name banked step 10, never the collapsed 30 as the one to salvage."""
    row = _row((10, 20, 30))
    assert row.report.recommendation is not None
    assert "banked step 10 (the last before the collapse began at step 20)" in (
        row.report.recommendation.why)
    where, updated = await _posted(slack, store, prefix, tmp_path, clock, row=row)
    head = blocks_text(where["blocks"][:1])
    assert "collapse at step 30; salvage banked step 10" in head
    assert "salvage banked step 10 (the last before the collapse began at step 20)" in head
    assert "banked checkpoint: step 30" not in head
    confirm = _confirm(where["blocks"])
    assert "Salvage: banked step 10 (the last before the collapse began at step 20)" in confirm
    assert "Banked step: 30" not in confirm and len(confirm) <= 300
    done = blocks_text(_blocks(updated))
    assert "salvage banked step 10 (the last before the collapse began at step 20)" in done
    assert "banked checkpoint: 30" not in done


async def test_no_save_before_the_collapse_says_none_is_safe(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Saves at 20 and 30 only (near miss to the above): no banked checkpoint is safe."""
    where, _ = await _posted(slack, store, prefix, tmp_path, clock, row=_row((20, 30)))
    head = blocks_text(where["blocks"][:1])
    assert "no banked checkpoint is safe" in head and "collapse began at step 20" in head
    assert "banked checkpoint: step 30" not in head
    confirm = _confirm(where["blocks"])
    assert "no banked checkpoint is safe" in confirm and "Banked step: 30" not in confirm


async def test_the_no_kill_recommendation_names_the_same_target(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """With ``no_kill`` the DM is a recommendation (acknowledge): it names step 10 too."""
    where, _ = await _posted(slack, store, prefix, tmp_path, clock, row=_row((10, 20, 30)),
                             no_kill=True)
    text = blocks_text(where["blocks"])
    assert "acknowledge" in json.dumps(where["blocks"]) and "cancel_salvage" not in json.dumps(
        where["blocks"])
    assert "salvage banked step 10 (the last before the collapse began at step 20)" in (
        blocks_text(where["blocks"][:1]))
    assert "banked checkpoint: step 30" not in text
