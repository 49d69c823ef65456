"""The files redis-py reads when the bot connects over TLS are checked before it starts.

redis-py loads a TLS connection's CA bundle (``[redis] tls_ca_file``, or the URL's
``ssl_ca_certs``/``ssl_certfile``/``ssl_keyfile``) synchronously, in the event loop, as it
connects: a FIFO there blocked the bot at its first Redis command, its Slack acks with it. A
file that is not a regular file is bad config for the bot (exit 2, one line naming the key and
the file, before a port is bound), and a warning of ``check-config``; ``sweep`` needs no Redis
and is not stopped by it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING

ROOT = Path(__file__).parents[2]


def _config(tmp_path: Path, redis: str) -> Path:
    path = tmp_path / "jobtables.toml"
    path.write_text(f'[[clusters]]\nname = "snapshot"\nkind = "replay"\npath = "{DEMO_RECORDING}"'
                    f'\n\n[redis]\n{redis}\n')
    return path


def _run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update(SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="s", JOBTABLES_CONFIG="")
    return subprocess.run([sys.executable, "-m", "bot.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, check=False, env=env, cwd=ROOT)


@pytest.mark.parametrize("redis", [
    'url = "rediss://127.0.0.1:6379/0"\ntls_ca_file = "FIFO"',
    'url = "rediss://127.0.0.1:6379/0?ssl_ca_certs=FIFO"',
    'url = "rediss://127.0.0.1:6379/0?ssl_certfile=FIFO"',
    'sentinels = ["127.0.0.1:26379"]\nservice_name = "x"\ntls = true\ntls_ca_file = "FIFO"',
], ids=["tls_ca_file", "ssl_ca_certs", "ssl_certfile", "sentinels"])
def test_a_tls_file_that_is_no_file_stops_the_bot_at_once(tmp_path: Path, redis: str) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    config = _config(tmp_path, redis.replace("FIFO", str(fifo)))
    done = _run("bot", "--config", str(config), "--port", "0")
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    line = done.stderr.strip()
    assert "\n" not in line and str(fifo) in line and "not a regular file" in line, line
    checked = _run("check-config", "--config", str(config))
    assert checked.returncode == 0 and str(fifo) in checked.stderr
    assert "not a regular file" in checked.stderr
    swept = _run("sweep", "--config", str(config))
    assert swept.returncode == 0, swept.stderr


def test_a_plain_url_names_no_tls_file(tmp_path: Path) -> None:
    """On a plain connection the CA file means nothing (redis-py never reads it): no error."""
    from bot.config_checks import redis_files
    from bot.config_file import load_config

    config = load_config(_config(tmp_path, 'tls_ca_file = "/nonexistent/ca.pem"'))
    assert redis_files(config.redis) == []
