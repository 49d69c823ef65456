"""Reading one chunk's trajectories for turns never costs a later chunk its trial count.

bbb1795 bounded the turns to ``TURN_SAMPLE`` trajectories a job dir, read "after the count"
so that "the count stays whole: only fewer turns are averaged" -- but a job dir's sample was
read before the next job dir of the root was counted, and every chunk of a run shares one
time bound. A run of several chunks of installed-agent trials (a trajectory is hundreds of
KiB) spent the bound on the first chunks' trajectories and counted the last chunks cut short
(``complete`` False): the whole-run count the rulebook asks for ("Count result.json over the
whole run") lost to the turns. Every chunk is counted first; the turns come after.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from probes.remote.trial_roots import collect_trials
from tests.probes.remote.test_trajectory_sample import T0, _template, _trajectory

CHUNKS = 3
TRIALS = 5


def _ticks() -> Callable[[], float]:
    """A fake clock: one second a reading (every bound check costs the same, so the test
    says how many checks fit, not how fast this machine reads)."""
    state = {"now": 0.0}

    def now() -> float:
        state["now"] += 1.0
        return state["now"]
    return now


def _run(tmp_path: Path) -> Path:
    """``CHUNKS`` job dirs of ``TRIALS`` ended trials each, turns only in trajectories."""
    root = tmp_path / "jobs"
    template = _template()
    for c in range(CHUNKS):
        job = root / f"chunk-{c:02d}"
        job.mkdir(parents=True)
        (job / "config.json").write_text("{}")
        for i in range(TRIALS):
            trial = job / f"task-{i:02d}__c{c}t{i}"
            (trial / "agent").mkdir(parents=True)
            at = T0.replace(minute=c * 10 + i)
            (trial / "result.json").write_text(json.dumps(dict(
                template, trial_name=trial.name, started_at=at.isoformat(),
                finished_at=at.replace(second=50).isoformat())))
            (trial / "agent" / "trajectory.json").write_text(_trajectory(4))
    return root


def test_every_chunk_is_counted_whole_before_any_trajectory_is_read(tmp_path: Path) -> None:
    root = _run(tmp_path)
    # Room for every chunk's count (about TRIALS + 3 checks a chunk) and a few trajectories,
    # not for every trajectory of the first chunks as well.
    budget = CHUNKS * (TRIALS + 3) + 4
    jobs = collect_trials([str(root)], budget_s=budget, clock=_ticks())[str(root)]["jobs"]
    tallies = {Path(d).name: job["tally"] for d, job in jobs.items()}
    assert sorted(tallies) == [f"chunk-{c:02d}" for c in range(CHUNKS)]
    assert all(t["complete"] for t in tallies.values()), {
        name: (t["complete"], t["completed"]) for name, t in tallies.items()}
    assert sum(t["completed"] for t in tallies.values()) == CHUNKS * TRIALS
    # what time was left read some turns, each a trajectory's 4
    turns = [(t["turns_sum"], t["turns_n"]) for t in tallies.values()]
    assert sum(n for _, n in turns) >= 1
    assert all(s == 4 * n for s, n in turns)


def test_with_time_enough_every_chunks_turns_are_read(tmp_path: Path) -> None:
    """Near miss: an ample bound still reads every chunk's sample."""
    root = _run(tmp_path)
    jobs = collect_trials([str(root)], budget_s=10_000, clock=_ticks())[str(root)]["jobs"]
    for job in jobs.values():
        tally = job["tally"]
        assert tally["complete"] and (tally["turns_sum"], tally["turns_n"]) == (4 * TRIALS, TRIALS)
