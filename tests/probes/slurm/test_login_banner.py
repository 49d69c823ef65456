"""A login node whose shell prints text before each command's output (a motd echoed by
``~/.bashrc``, ``module load`` notes) is read as any other. Found by the hostile dry run: an
sshd whose sessions print two banner lines first (``ForceCommand`` of a wrapper that echoes
them, then runs the command) made every job of a 1,011-job sweep ``fetch-failed``
'collector answer is unreadable: Expecting value' (the answer's first line was the banner),
and ``jobtables job`` 'collector did not run'.

The real collector runs locally on real logs (``tests.probes.slurm.test_stream``), each
command's stdout led by the banner, as that login shell gives it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from probes.models import JobState, SchedulerRecord
from probes.slurm import onejob
from probes.slurm.parse import past_banner
from probes.slurm.request import collector_request
from probes.slurm.transport import CommandResult
from tests.probes.slurm.test_stream import USER, Collector, _cluster, _probe, hf_log, world

BANNER = "Welcome to login01 -- maintenance Friday\nmodule: loaded cuda/12.4\n"


class _Chatty(Collector):
    """The collector and squeue behind a login shell that prints :data:`BANNER` first."""

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        res = await super().run(argv, stdin=stdin, check=check)
        return CommandResult(res.argv, res.exit_status, BANNER + res.stdout, res.stderr)

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        on_chunk(BANNER.encode())
        return await super().run_streaming(argv, stdin=stdin, on_chunk=on_chunk)


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
async def test_a_sweep_behind_a_chatty_login_shell_reads_every_job(
        tmp_path: Path, streaming: bool) -> None:
    squeue_bin, ids = world(tmp_path, 4)
    runner = _Chatty(squeue_bin, streaming=streaming)
    async with asyncio.timeout(60):
        facts = await _probe(runner).collect()
    assert facts.status == "ok", facts.detail
    assert [j.record.job_id for j in facts.jobs] == ids
    assert all(j.log is not None and j.log.status == "ok" for j in facts.jobs), [
        j.log.error for j in facts.jobs if j.log]
    assert all(j.summary is not None and j.summary.points for j in facts.jobs)


async def test_one_job_behind_a_chatty_login_shell_is_read(tmp_path: Path) -> None:
    """The one-job read's collector answer (one document) is read past the banner."""
    log = tmp_path / "train.out"
    log.write_text(hf_log(1))
    record = SchedulerRecord(cluster="s", job_id="1", name="sft-1", user=USER,
                             state=JobState.RUNNING, stdout_path=str(log),
                             workdir=str(tmp_path))
    runner = _Chatty(tmp_path)
    async with asyncio.timeout(60):
        answer = await onejob._run(runner, collector_request([record], _cluster()))
    assert answer is not None and answer["jobs"]["1"]["log"]["status"] == "ok"


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1}\n', '{"a": 1}\n'),
    (BANNER + '{\n "a": 1\n}\n', '{\n "a": 1\n}\n'),
    ("no json at all\n", "no json at all\n"),
    ("", ""),
])
def test_past_banner(text: str, expected: str) -> None:
    """The text from its first line opening a JSON object; text with none is left alone."""
    assert past_banner(text) == expected


def test_the_rollout_readers_answer_is_read_past_the_banner() -> None:
    """``jobtables probe`` behind that shell said 'nothing to judge: no rollouts were found'
    though the run's verl dumps were there (the reader's answer was not read)."""
    from probes.deep_read import _answer

    res = CommandResult(("python3", "-"), 0, BANNER + '{"dumps": [], "skipped": []}\n', "")
    assert _answer(res, "login01:22") == ({"dumps": [], "skipped": []}, None)
