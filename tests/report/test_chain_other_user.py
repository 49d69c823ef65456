"""Another user's job waiting on a run is not that run's restart.

SLURM lets any user queue a job behind anyone's: on the real SLURM 22.05, ``jtuser`` queued
``sbatch --dependency=afterany:808`` behind ``jobtables``' RL run 808 (accepted, shown
``afterany:808(unfulfilled)``). The chain rules took any ``afterany`` dependant as the restart
(rule 1), and so did a remembered edge (rule 2, the bot's memory of the dependency once SLURM
cleared it): 808's walltime TIMEOUT would read a normal chain restart with jtuser's job as its
successor, no alert, while nothing of 808's was queued. A dependant of another user, or an
edge to one, now continues no run (the fallbacks already asked for the same user), and the
edge remembered for a run is its own user's dependant even when another's came first.
"""

from __future__ import annotations

from datetime import timedelta

from probes.models import JobState
from report.chain import chain_link, dependency_edges
from tests.report.factories import NOW, record

END = NOW - timedelta(minutes=5)


def _victim(state: JobState = JobState.TIMEOUT):  # type: ignore[no-untyped-def]
    return record("rl-victim", "808", state, end_time=END if state is JobState.TIMEOUT else None)


def _squatter(state: JobState = JobState.PENDING, **over):  # type: ignore[no-untyped-def]
    fields = {"user": "mallory", "workdir": "/home/mallory", "submit_time": NOW - timedelta(
        hours=2, minutes=30)}
    if state is JobState.PENDING:
        fields |= {"reason": "Dependency", "dependency": "afterany:808(unfulfilled)",
                   "depends_on": ("808",), "start_time": None}
    fields.update(over)
    return record("rl-victim", "809", state, **fields)


def test_another_users_dependant_is_no_restart() -> None:
    victim, squatter = _victim(), _squatter()
    link = chain_link(victim, [victim, squatter], {})
    assert link.successor is None
    assert "809" not in (link.blocked or "")


def test_a_remembered_edge_to_another_users_job_is_no_restart() -> None:
    victim, squatter = _victim(), _squatter(JobState.RUNNING)
    assert chain_link(victim, [victim, squatter], {"808": "809"}).successor is None


def test_the_own_users_restart_is_still_found_beside_it() -> None:
    victim, squatter = _victim(), _squatter()
    own = record("rl-victim-r2", "810", JobState.PENDING, workdir="/elsewhere",
                 reason="Dependency", dependency="afterany:808(unfulfilled)",
                 depends_on=("808",), start_time=None)
    assert chain_link(victim, [victim, squatter, own], {}).successor == "810"


def test_the_remembered_edge_is_the_own_users_dependant_even_when_queued_later() -> None:
    """The edge the bot keeps for a running run: its user's dependant, not the earlier one of
    another user (which would have displaced it, losing the real restart once SLURM clears
    the dependency)."""
    victim, squatter = _victim(JobState.RUNNING), _squatter()
    own = record("rl-victim-r2", "810", JobState.PENDING, workdir="/elsewhere",
                 reason="Dependency", dependency="afterany:808(unfulfilled)",
                 depends_on=("808",), start_time=None, submit_time=NOW - timedelta(hours=1))
    assert dependency_edges([victim, squatter, own]) == {"808": "810"}
