"""A queue that stops changing is reused again within ten sweeps, wherever its last change fell.

Issue 12: a bot's probe holds its last ``squeue --json`` document with the digest of the
signature listing run before it, and backs the listing off while it spares nothing
(``probes.slurm.snapshot.ListingBackoff``). The sweeps it skips print the document without a
listing, so it is not held: once the queue changed during such a stretch, the held digest
was lost to it. The next listing-first sweep then missed though the queue had gone quiet,
and that miss backed the listing off for another stretch: 16 sweeps, not the eight the
policy promised, before a quiet queue was reused (a day at a 90-minute sweep interval).

Driven as ``test_queue_reuse``'s churn test: the real probe and the shipped collector over a
stand-in ``squeue`` whose document the test changes.
"""

from __future__ import annotations

from pathlib import Path

from probes.slurm.snapshot import ListingBackoff
from tests.probes.slurm.test_queue_reuse import _bot_probe, _calls, _set_document, world


async def test_a_queue_quiet_after_a_change_in_a_skipped_stretch_is_reused_soon(
        tmp_path: Path) -> None:
    squeue_bin, _ids = world(tmp_path, 2)
    tap, probe = _bot_probe(squeue_bin)
    try:
        _, states = await probe.collect_since({})
        _calls(tmp_path)
        listed = ""
        for n in range(12):  # the last change falls in the stretch after the 10th sweep
            new = 8000 + n
            _set_document(tmp_path, lambda jobs, new=new: jobs.append(
                dict(jobs[0], job_id=new, name=f"new-{new}")))
            await probe.collect_since(states)
            listed += "L" if any(" -t all " in f" {c} " for c in _calls(tmp_path)) else "."
        assert listed.endswith(".")  # the queue's last change: a sweep without the listing
        quiet = []
        for _ in range(10):
            facts, _ = await probe.collect_since(states)
            quiet.append(tap.heads[-1]["squeue"].get("same") is not None)
            assert "8011" in {j.record.job_id for j in facts.jobs}  # never a stale queue
        assert any(quiet), "a quiet queue not reused within 10 sweeps"
    finally:
        await probe.aclose()


def test_a_miss_after_a_skipped_stretch_tries_once_more_before_backing_off() -> None:
    """On a queue changing before every sweep the listing still runs on two sweeps in nine
    at most, once the backoff is at its cap."""
    backoff = ListingBackoff()
    pattern = ""
    for _ in range(36):
        wanted = backoff.wanted()
        pattern += "L" if wanted else "."
        if wanted:
            backoff.printed()
    assert pattern == "LL.LL...LL.......LL.......LL.......L"
    backoff.spared()
    assert all(backoff.wanted() for _ in range(5))
