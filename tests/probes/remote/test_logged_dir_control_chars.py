"""A trials or Harbor jobs dir the log names with a control character in it is not used.

``logged_paths._place`` leaves a checkpoint path holding a control character alone; the
trials dirs (``logged_trials_dirs``) and Harbor's jobs dirs (``harbor_paths``, 475be1c) took
any: a NUL in the named path (a log written over a hole, a hostile echo) reached ``os.open``,
whose ``ValueError: embedded null byte`` no reader catches (the collector's text has its
control bytes replaced first, but these are the job owner's text wherever they come from).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.remote.guard import Guard
from probes.remote.harbor_paths import harbor_jobs_dirs
from probes.remote.logged_paths import logged_trials_dirs
from probes.remote.trial_roots import collect_logged_trials

TEXTS = [
    "+ harbor run -d terminal-bench@2.0 -a claude-code -o /scratch/a\x00b/jobs\n",
    "+ harbor run -d terminal-bench@2.0 -a claude-code -o jobs\x07/x\n",
    "Trials dir: /scratch/a\x00b/trials\n",
    "trials_dir: trials\x7f/x\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_named_dir_with_a_control_character_is_left_alone(tmp_path: Path, text: str) -> None:
    work = str(tmp_path)
    assert harbor_jobs_dirs(text, work, [work]) + logged_trials_dirs(text, work, [work]) == []
    guard = Guard(os.geteuid(), 5.0)
    assert collect_logged_trials(text, work, [work], [], guard) == {}


def test_a_plain_named_dir_is_still_taken(tmp_path: Path) -> None:
    """Near miss: the same lines without the control character name their dirs."""
    work = str(tmp_path)
    assert harbor_jobs_dirs("+ harbor run -a claude-code -o /scratch/ab/jobs\n", work,
                            [work]) == [("/scratch/ab/jobs", [])]
    assert logged_trials_dirs("Trials dir: /scratch/ab/trials\n", work, [work]) == [
        ("/scratch/ab/trials", [])]
