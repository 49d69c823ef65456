"""The tier markers follow the fixtures a test uses (and its folder), so
``-m "not slurm and not redis"`` is exactly the tests that need no service."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
INI = ("[pytest]\nasyncio_default_fixture_loop_scope = function\n"
       "markers =\n    slurm: s\n    redis: r\n    e2e: e\n")

SAMPLE = '''
import pytest

@pytest.fixture
def slurm_env():
    return "cluster"

@pytest.fixture
def store(redis_server):
    return "store"

@pytest.fixture
def harness(store):
    return "bot"

def test_pure():
    pass

def test_on_slurm(slurm_env):
    pass

def test_on_redis(store):
    pass

def test_through_two_fixtures(harness):
    pass

def test_on_both(slurm_env, harness):
    pass
'''


@pytest.fixture
def tiers(request: pytest.FixtureRequest) -> ModuleType:
    """The real ``tests/conftest.py``, as this session loaded it (run again as a plugin)."""
    plugin = request.config.pluginmanager.get_plugin(str(CONFTEST))
    assert isinstance(plugin, ModuleType)
    return plugin


class _Marks:
    """Records each collected test's tier markers."""

    def __init__(self) -> None:
        self.by_test: dict[str, set[str]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.by_test[item.name] = {m.name for m in item.iter_markers()} & {
                "slurm", "redis", "e2e"}


def test_markers_follow_fixtures_and_the_e2e_folder(
    pytester: pytest.Pytester, tiers: ModuleType,
) -> None:
    """``slurm_env`` marks slurm, ``redis_server`` (even two fixtures down) marks redis, and a
    test under ``tests/e2e/`` is e2e; a test needing none of them carries no tier marker."""
    pytester.makeini(INI)
    e2e = pytester.mkdir("tests") / "e2e"
    e2e.mkdir()
    (e2e / "test_far.py").write_text("def test_far():\n    pass\n")
    pytester.makepyfile(test_sample=SAMPLE)
    marks = _Marks()
    result = pytester.runpytest_inprocess("--collect-only", "-q", plugins=[tiers, marks])
    assert result.ret == 0
    assert marks.by_test == {
        "test_pure": set(),
        "test_on_slurm": {"slurm"},
        "test_on_redis": {"redis"},
        "test_through_two_fixtures": {"redis"},
        "test_on_both": {"slurm", "redis"},
        "test_far": {"e2e"},
    }


@pytest.mark.parametrize(("ci", "outcome"), [("", "skipped"), ("true", "errors")])
def test_missing_redis_skips_with_the_reason_but_fails_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tiers: ModuleType, ci: str,
    outcome: str,
) -> None:
    """Like the SLURM fixture: no Redis is a skip that says why, and under ``CI=true`` (after
    trying ``scripts/services``, absent here) a failure, never a silent pass."""
    monkeypatch.setattr(tiers, "REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(tiers, "ROOT", pytester.path)  # no scripts/services: nothing starts
    monkeypatch.setenv("CI", ci)
    pytester.makeini(INI)
    pytester.makepyfile(test_needs_redis="def test_it(redis_server):\n    pass\n")
    result = pytester.runpytest_inprocess("-rs", plugins=[tiers])
    result.assert_outcomes(**{outcome: 1})
    reason = "Redis unavailable under CI" if ci else "Redis at redis://127.0.0.1:1/0 does not"
    assert reason in result.stdout.str()
