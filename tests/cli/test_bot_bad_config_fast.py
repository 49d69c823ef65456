"""``jobtables bot`` with a bad config fails before it loads the Slack and HTTP stack.

Importing ``bot.server`` (slack-bolt, aiohttp, the app) is about 3 s of CPU at nice 19 on a
busy machine; a config that cannot serve is told at once (exit 2, the line and key), without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROBE = """
import sys
from bot.cli import main
code = main(["bot", "--config", sys.argv[1]])
print(code, "bot.server" in sys.modules, "slack_bolt" in sys.modules)
"""


def test_a_bad_config_is_refused_before_the_server_is_imported(tmp_path: Path) -> None:
    """A config with an unknown key: exit 2, and neither bot.server nor slack_bolt loaded."""
    bad = tmp_path / "jobtables.toml"
    bad.write_text('[report]\nwidth = 100\nnot_a_key = 1\n')
    done = subprocess.run([sys.executable, "-c", PROBE, str(bad)], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, check=False)
    assert done.stdout.split() == ["2", "False", "False"], (done.stdout, done.stderr[-500:])
    assert "not_a_key" in done.stderr


def test_the_bot_says_the_configs_warnings_at_start(tmp_path: Path) -> None:
    """What check-config warns of (a benign pattern that matches every line, so every fault
    would read as noise) is said on stderr when the bot starts too: an operator who never ran
    check-config still sees it, in the bot's own output, before anything else fails."""
    config = tmp_path / "jobtables.toml"
    config.write_text('[[clusters]]\nname = "a"\nkind = "slurm"\nlocal = true\n'
                      'benign_patterns = [".*"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(config)], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, check=False, env=env)
    assert done.stdout.split()[0] == "2", (done.stdout, done.stderr[-500:])  # no Slack tokens
    assert (f"jobtables: warning: {config}: cluster 'a': benign_patterns '.*' matches every "
            "line") in done.stderr
