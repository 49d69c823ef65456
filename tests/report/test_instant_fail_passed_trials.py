"""A trial its verifier passed is no instant failure, however fast and token-less its agent.

Replayed under a real sbatch job (eval-oracle-x-tbench-sanity, as jobtables): a sanity eval
with Harbor's oracle agent, which runs each task's ``solution/solve.sh`` and calls no model
(its ``agent_result`` token counts stay null), solve.sh done in under a second, every trial
verified with reward 1.0. ``jobtables job`` read ``warning [instant-fail] INSTANT-FAIL: 40/40
trials, null output``, diagnose "the tunnel is not carrying traffic", with a pass-rate of 1.0.
An instant failure is an agent that ended before it could work; a trial scored above 0 did
the work. The near miss: the same instant, token-less trials scored 0 stay instant-fail.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.harbor import is_instant_fail
from probes.remote.harbor_reduce import reduce_trial
from probes.remote.trial_count import is_instant
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LOG = ("2026-12-05T15:50:00Z INF Registered tunnel connection connIndex=0 event=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _oracle(jobs: Path, reward: float) -> None:
    """Harbor's oracle agent's trials: solve.sh in 0.2 s, no model call, verified."""
    for path in jobs.glob("*/*/result.json"):
        result = json.loads(path.read_text())
        result["exception_info"] = None
        result["agent_info"] = {"name": "oracle", "version": "1.0.0", "model_info": None}
        result["verifier_result"] = {"rewards": {"reward": reward}}
        result["verifier"] = {"started_at": result["agent_execution"]["finished_at"],
                              "finished_at": result["finished_at"]}
        path.write_text(json.dumps(result))


@pytest.mark.parametrize(("reward", "flagged"), [(1.0, False), (0.0, True)])
def test_passed_trials_are_no_instant_failures(tmp_path: Path, reward: float,
                                               flagged: bool) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__15-50-00", {"instant": 40, "inflight": 16}, total=300,
               seed=91)
    _oracle(jobs, reward)
    one = next(jobs.glob("*/*/result.json"))
    reduced = reduce_trial(one.read_text())
    assert reduced is not None and is_instant(reduced) is flagged
    now = datetime.now(UTC)
    facts = _facts(jobs, _LOG, "eval-oracle-x-tbench-sanity", now=now)
    assert facts.trials is not None
    assert all(is_instant_fail(t) is flagged for t in facts.trials.trials)
    row = judge(facts, now=now).report
    assert ("instant-fail" in row.flags) is flagged, (row.flags, row.trend)
