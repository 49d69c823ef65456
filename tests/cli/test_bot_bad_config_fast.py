"""``jobtables bot`` with a bad config fails before it loads the Slack and HTTP stack.

Importing ``bot.server`` (slack-bolt, aiohttp, the app) is about 3 s of CPU at nice 19 on a
busy machine; a config that cannot serve is told at once (exit 2, the line and key), without it.
"""

from __future__ import annotations

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
