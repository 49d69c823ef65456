"""A catch-all job waiting in the queue carries ``buffer-filling``, as every other bucket's does.

CONTRACT §6 ``buffer-filling``: "running or in bring-up, no metric step yet"; §7 puts such jobs
in the "Filling buffer" table. Driving `jobtables sweep` against the Kubernetes API stand-in, a
pending ``upload-pending`` Job (no pod created yet) sat in the text's Filling buffer table
while its JSON said ``"verdict": "buffering", "flags": []``: a script reading the flags could
not find it, where a pending RL, SFT, datagen or eval job (queue admission) is flagged.
"""

from __future__ import annotations

import pytest

from probes.models import JobState
from report.layouts import is_buffering
from tests.report.factories import facts, judge, record


@pytest.mark.parametrize("name", ["upload-ckpt-qwen7b", "datagen-consolidate-x", "gpu-ci-nightly",
                                  "rl-grpo-x", "sft-x"])
def test_a_pending_job_of_any_bucket_is_flagged_as_its_table_shows_it(name: str) -> None:
    """Pending on resources: verdict buffering, the flag, the Filling buffer table."""
    job = judge(facts(record(name, "71", JobState.PENDING, reason="Resources"))).report
    assert job.verdict == "buffering" and is_buffering(job)
    assert "buffer-filling" in job.flags, (job.bucket, job.flags)


def test_a_held_catch_all_job_is_not_filling_a_buffer() -> None:
    """Held by its owner: in no queue admission, so neither the flag nor the table."""
    job = judge(facts(record("upload-ckpt", "72", JobState.PENDING, reason="JobHeldUser"))).report
    assert "buffer-filling" not in job.flags and not is_buffering(job)
