"""A sandbox refused within a second is a trial that never started, not an instant-fail of the
tunnel (found by an acceptance dry run: sbatch evals on the real SLURM writing Harbor-format
trees, read through ``jobtables sweep --format json``).

A sandbox provider refusing credentials answers its create call at once (a 401 in a few hundred
ms): Harbor records the trial with ``exception_info`` (``DaytonaError: ... 401 Unauthorized``),
no agent phase, ``agent_result`` and ``verifier_result`` null, and ``finished_at`` within the
second of ``started_at``. Instant-fail fell back to the whole trial's times when there was no
agent phase, so such trials read 'INSTANT-FAIL ... the tunnel is not carrying traffic' with
``tunnel✗`` beside a registered tunnel whose engine answered 200s, and the diagnosis pointed at
the tunnel instead of the sandbox provider the rulebook names for repeated auth failures.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.harbor import is_instant_fail
from probes.models import TrialResult
from probes.remote.harbor_reduce import reduce_trial
from probes.remote.trial_count import is_instant
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LOG = ("2026-12-04 00:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _refused_at_once(job_dir: Path, seconds: float) -> int:
    """Make every never-started trial of ``job_dir`` end ``seconds`` after it started, as a
    provider answering its create call at once does; the count of trials so changed."""
    changed = 0
    for path in job_dir.glob("*/result.json"):
        data = json.loads(path.read_text())
        if data["agent_execution"] is not None:
            continue
        start = datetime.fromisoformat(data["started_at"])
        data["finished_at"] = (start + timedelta(seconds=seconds)).isoformat()
        path.write_text(json.dumps(data, indent=4))
        changed += 1
    return changed


@pytest.mark.parametrize("kind", ["authfail", "never"])
def test_a_sandbox_refused_at_once_is_not_the_tunnels_instant_fail(tmp_path: Path,
                                                                    kind: str) -> None:
    """Never-started trials ending within the second keep the tunnel's mark and are told as
    the sandbox provider's; an auth refusal also raises auth-failures."""
    job_dir = tmp_path / "jobs" / "2026-12-04__00-00-00"
    MAKE.write(job_dir, {"pass": 2, "fail": 2, kind: 9, "inflight": 4}, total=60, seed=27)
    assert _refused_at_once(job_dir, 0.4) == 9
    detail = judge(_facts(tmp_path / "jobs", _LOG, "eval-qwen3-tbench"), now=datetime.now(UTC))
    row = detail.report
    assert detail.infra is not None and detail.infra.startswith("tunnel✓ "), detail.infra
    assert "tunnel" not in row.trend, row.trend
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert "tunnel" not in row.recommendation.why, row.recommendation.why
    assert "provider" in row.recommendation.why, row.recommendation.why
    assert ("auth-failures" in row.flags) is (kind == "authfail"), row.flags


def test_the_collector_and_the_judge_agree_on_a_refused_trial(tmp_path: Path) -> None:
    """The login-node tally and the report layer's rule read a refused trial alike: not
    instant; an agent that ran and ended at once with null output still is."""
    job_dir = tmp_path / "jobs" / "2026-12-04__00-00-00"
    MAKE.write(job_dir, {"authfail": 1, "instant": 1}, seed=3)
    _refused_at_once(job_dir, 0.4)
    seen = {}
    for path in job_dir.glob("*/result.json"):
        raw = path.read_text()
        reduced = reduce_trial(raw)
        assert reduced is not None
        kind = "refused" if json.loads(raw)["agent_execution"] is None else "instant"
        fields = {k: v for k, v in reduced.items() if k in TrialResult.model_fields}
        trial = TrialResult.model_validate({**fields, "name": path.parent.name})
        seen[kind] = (is_instant(reduced), is_instant_fail(trial))
    assert seen == {"refused": (False, False), "instant": (True, True)}
