"""Two warnings that were stderr noise on every start and every chart are silenced at their
source, each by a filter scoped to its own message; other warnings still show.

- Bolt logs "As you gave `client` as well, `token` will be unused." at every start: it reads
  ``SLACK_BOT_TOKEN`` from the environment (where deployments give the token to
  ``bot.settings``) although the app is given our own client, which is meant to win.
- matplotlib warns "Glyph 128640 (\\N{ROCKET}) missing from font(s) DejaVu Sans." for each emoji
  of a job name in the ``/job`` chart's title (drawn as a box; nothing to act on).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack

REPO = Path(__file__).resolve().parents[2]
TOKEN_WARNING = warning_client_prioritized_and_token_skipped()


@pytest.mark.redis
async def test_bolt_s_unused_token_warning_is_not_logged_and_others_are(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The app built with ``SLACK_BOT_TOKEN`` set, as deployed: Bolt's warning about it is
    dropped; another warning of the same Bolt logger still reaches the log."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    caplog.set_level(logging.WARNING)
    async with running_bot(slack, store, sweeper, clock):
        logging.getLogger("slack_bolt.AsyncApp").warning("another bolt warning")
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("slack_bolt")]
    assert TOKEN_WARNING not in messages
    assert "another bolt warning" in messages


CHART_SCRIPT = """
import warnings
from matplotlib.figure import Figure

from bot.chart import render_history_png
from probes.models import MetricPoint
from tests.bot.builders import detail, job

history = tuple(MetricPoint(step=s, values={"loss": 1.0 / s}) for s in range(1, 6))
png = render_history_png(detail(job("7", "rl-\\N{ROCKET}-\\N{FIRE}-run", bucket="sft"),
                                history=history))
assert png is not None
print("chart drawn", flush=True)
fig = Figure()  # the same warning from a figure of someone else's: not ours to silence
fig.suptitle("\\N{SNAKE}")
fig.savefig(__import__("io").BytesIO(), format="png")
warnings.warn("another user warning", UserWarning)
"""


def test_missing_glyph_warnings_of_the_job_chart_are_silenced_only_there() -> None:
    """A chart of a job named with emoji writes nothing to stderr; the same glyph warning
    from a figure drawn elsewhere, and any other warning, still do."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run([sys.executable, "-c", CHART_SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "chart drawn" in done.stdout
    assert "ROCKET" not in done.stderr and "FIRE" not in done.stderr, done.stderr
    assert "Glyph 128013 (\\N{SNAKE}) missing from font" in done.stderr, done.stderr
    assert "another user warning" in done.stderr, done.stderr
