"""Test tiers: markers from the fixtures a test uses, and the shared real-Redis fixture.

Policy (STYLE "Tests, by tier"): a test's tier is what it needs, and what it needs is its
fixtures, so the markers are applied here, once, instead of by hand:

- ``slurm``: the test uses ``slurm_env`` (the local SLURM 22.05 and sshd of scripts/services);
- ``redis``: the test uses ``redis_server`` (directly, or through ``store``, ``harness`` and
  every other Redis-backed fixture, which all depend on it);
- ``e2e``: the test lives under ``tests/e2e/`` (explicit ``pytest.mark.e2e`` marks stay).

``pytest -m "not slurm and not redis"`` then runs the pure tiers and the in-process peers only.
A service that is missing skips its tests with the reason, except under ``CI=true``, where
``bash scripts/services`` is run once and the tests FAIL if the service is still missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import settings as hypothesis_settings
from redis.exceptions import RedisError

ROOT = Path(__file__).resolve().parents[1]

# Under CI the property tests draw the same examples on every run (a failure there is one that
# reproduces); elsewhere they explore, and keep what failed in .hypothesis/.
hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    hypothesis_settings.load_profile("ci")
REDIS_URL = "redis://127.0.0.1:6379/0"


SERVICES = ("slurm_env", "sentinel")
"""Fixtures of the tests that drive the shared services' state (marker ``services``, with
``tests/e2e/``): the one SLURM node (whose daemons a test stops and restarts, whose slots the
jobs fill, whose walltime waits span modules), sshd (whose logins a test counts), and the
Sentinel topology a failover changes. ``scripts/test`` runs them in order in one pytest
process and every other test in a second one beside it."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test with the tiers its fixtures (and folder) put it in."""
    e2e = config.rootpath / "tests" / "e2e"
    for item in items:
        needs = set(getattr(item, "fixturenames", ()))
        if "slurm_env" in needs:
            item.add_marker(pytest.mark.slurm)
        if "redis_server" in needs:
            item.add_marker(pytest.mark.redis)
        if item.path.is_relative_to(e2e):
            item.add_marker(pytest.mark.e2e)
        if needs.intersection(SERVICES) or item.path.is_relative_to(e2e):
            item.add_marker(pytest.mark.services)


def redis_unavailable(url: str | None = None) -> str | None:
    """Why the Redis at ``url`` (default :data:`REDIS_URL`) cannot be used, or None when it
    answers a PING."""
    url = url or REDIS_URL
    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        client.ping()
    except RedisError as exc:
        return f"Redis at {url} does not answer: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def redis_server() -> str:
    """The real Redis's URL; skipped with the reason (or, under CI, started and required)."""
    reason = redis_unavailable()
    if reason and os.environ.get("CI") == "true":
        subprocess.run(["bash", str(ROOT / "scripts" / "services")], check=False, timeout=900)
        reason = redis_unavailable()
        if reason:
            pytest.fail(f"Redis unavailable under CI: {reason}")
    if reason:
        pytest.skip(reason)
    return REDIS_URL


@pytest.fixture(autouse=True)
def _child_path_as_found() -> Iterator[None]:
    """PYTHONSAFEPATH as the test found it: a bot's worker pool sets it in the process's
    environment (``bot.offload.keep_cwd_off_child_path``, for its own children), and a later
    test's ``python -c`` child in the repository would then not find ``tests`` on its path."""
    before = os.environ.get("PYTHONSAFEPATH")
    yield
    if before is None:
        os.environ.pop("PYTHONSAFEPATH", None)
    else:
        os.environ["PYTHONSAFEPATH"] = before


@pytest.fixture(autouse=True, scope="session")
def _python3_unshimmed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``python3`` on the PATH (the interpreter the local collector and the stand-ins run) is
    the very interpreter it names, reached without a version manager's shim: pyenv's is a
    bash script running ``pyenv exec``, 0.1 s per start on an idle machine and 0.3 s on a busy
    one, before Python starts, and the local tests start it some 150 times. Where ``python3``
    is no script (a binary, a link to one) the PATH is left as it is."""
    found = shutil.which("python3")
    with open(found or os.devnull, "rb") as head:
        shim = head.read(2) == b"#!"
    if not (found and shim):
        yield
        return
    named = subprocess.run([found, "-c", "import sys; print(sys.executable)"], check=True,
                           capture_output=True, text=True, timeout=120).stdout.strip()
    links = tmp_path_factory.mktemp("python3")
    (links / "python3").symlink_to(named)
    before = os.environ["PATH"]
    os.environ["PATH"] = f"{links}{os.pathsep}{before}"
    yield
    os.environ["PATH"] = before


@pytest.fixture(autouse=True, scope="session")
def _cli_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CLI's Kubernetes memory (``bot.cli_memory``) of every test's commands, in-process
    or child, under the session's temporary directory, not the tester's own state dir."""
    before = os.environ.get("JOBTABLES_STATE_DIR")
    os.environ["JOBTABLES_STATE_DIR"] = str(tmp_path_factory.mktemp("jobtables-state"))
    yield
    if before is None:
        os.environ.pop("JOBTABLES_STATE_DIR", None)
    else:
        os.environ["JOBTABLES_STATE_DIR"] = before
