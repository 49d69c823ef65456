"""The collector's streamed answer (probes.slurm.answer, probes.slurm.early): jobs are parsed
as their lines arrive, and a partial, killed or garbled answer never drops a job or crashes.

The real collector runs here, locally (``python3 -``), on real log files, with a stand-in
``squeue`` first on its PATH printing a 22.05.8 job object per job (the one-trip sweep runs
squeue inside the collector). To kill or block it midway, the test appends a few lines to the
script the probe built, just before its ``main(...)`` call: the collector itself then dies
(SIGKILL) or waits after N jobs, exactly as one killed by the OOM killer or stuck on NFS would.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from probes.config import SlurmCluster
from probes.remote.script import build_collector_script
from probes.slurm.answer import AnswerReader, read_whole, stream_answer
from probes.slurm.early import EarlyFolds, folder
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import CommandResult, LocalRunner, Runner, run_streaming
from tests.probes.slurm.conftest import fake_squeue_bin

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
NOW = datetime.fromtimestamp(1796059000, tz=UTC)
USER = getpass.getuser()

KILL_AFTER = """
_collect_one_whole = _collect_one
_reached = [0]
def _collect_one(job, request, guard, *kept):
    _reached[0] += 1
    if _reached[0] > {n}:
        os.kill(os.getpid(), signal.SIGKILL)
    return _collect_one_whole(job, request, guard, *kept)
"""

BLOCK_AFTER = """
_collect_one_whole = _collect_one
_reached = [0]
def _collect_one(job, request, guard, *kept):
    _reached[0] += 1
    if _reached[0] == {n} + 1:
        while not os.path.exists({release!r}):
            time.sleep(0.01)
    return _collect_one_whole(job, request, guard, *kept)
"""


NO_LISTING = """
def _listing_specs(request):
    return []
"""
"""The collector without its fast listing: every job line after the head (the protocol these
tests hold line by line; the listing's own are in test_early_listing.py)."""


def hf_log(job: int, steps: int = 40) -> str:
    return "***** Running training *****\n" + "".join(
        f"{{'loss': {2.0 - s / 100:.3f}, 'learning_rate': 1e-05, 'epoch': {s / steps:.2f}}}\n"
        f"step {s}/{steps} job {job}\n" for s in range(1, steps + 1))


def world(tmp: Path, jobs: int) -> tuple[Path, list[str]]:
    """``jobs`` RUNNING jobs of this user with logs under ``tmp``; the stand-in squeue's dir."""
    template = next(j for j in json.loads((REAL / "squeue_early.json").read_text())["jobs"]
                    if j["job_state"] == "RUNNING")
    (tmp / "logs").mkdir()
    objects, ids = [], []
    for n in range(jobs):
        job_id = 7000 + n
        log = tmp / "logs" / f"train_{job_id}.out"
        log.write_text(hf_log(job_id))
        objects.append(dict(template, job_id=job_id, name=f"sft-{n}", user_name=USER,
                            standard_output=str(log), current_working_directory=str(tmp)))
        ids.append(str(job_id))
    document = json.loads((REAL / "squeue_early.json").read_text())
    document["jobs"] = objects
    return fake_squeue_bin(tmp / "squeue", json.dumps(document)), ids


class Collector:
    """A local runner: the collector with the stand-in squeue first on its PATH, its script
    altered by ``alter`` (run number, script) when given; sacct says accounting is off."""

    def __init__(self, squeue_bin: Path, *, alter: Callable[[int, str], str] | None = None,
                 streaming: bool = True, garble: str | None = None) -> None:
        self._bin = squeue_bin
        self._alter = alter
        self._local = LocalRunner(SlurmCluster(name="t", local=True, command_timeout_s=60))
        self.runs = 0
        self.streaming = streaming
        self._garble = garble
        self.target = "stream-test"
        self.login_user = USER
        self._sent = 0

    @property
    def commands_sent(self) -> int:
        return self._sent

    def factory(self, cluster: SlurmCluster) -> Runner:
        if self.streaming:
            return self
        return _RunOnly(self)

    def _argv(self, argv: Sequence[str], stdin: str | None) -> tuple[list[str], str | None]:
        if list(argv) != ["python3", "-I", "-"]:
            return list(argv), stdin
        self.runs += 1
        script = stdin or ""
        if self._alter is not None:
            cut = script.rindex("\nmain(")
            script = script[:cut] + "\n" + self._alter(self.runs, script) + script[cut:]
        path = f"PATH={self._bin}{os.pathsep}{os.environ.get('PATH', '')}"
        return ["env", path, "python3", "-I", "-"], script

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self._sent += 1
        if argv[0] == "sacct":
            return CommandResult(tuple(argv), 1, "", "Slurm accounting storage is disabled")
        args, script = self._argv(argv, stdin)
        res = await self._local.run(args, stdin=script, check=check)
        return CommandResult(tuple(argv), res.exit_status, res.stdout, res.stderr)

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        self._sent += 1
        args, script = self._argv(argv, stdin)
        feed = on_chunk
        if self._garble is not None:
            key = self._garble.encode() + b"\t"

            def feed(chunk: bytes) -> None:  # one job's entry garbled in transit
                on_chunk(chunk.replace(key + b'{"log"', key + b'{"log\x00'))
        res = await self._local.run_streaming(args, stdin=script, on_chunk=feed)
        return CommandResult(tuple(argv), res.exit_status, res.stdout, res.stderr)

    async def aclose(self) -> None:
        return None


class _RunOnly:
    """The same collector behind ``run`` only (no ``run_streaming``): the answer whole."""

    def __init__(self, inner: Collector) -> None:
        self._inner = inner
        self.target, self.login_user = inner.target, inner.login_user

    @property
    def commands_sent(self) -> int:
        return self._inner.commands_sent

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        return await self._inner.run(argv, stdin=stdin, check=check)

    async def aclose(self) -> None:
        return None


def _cluster() -> SlurmCluster:
    return SlurmCluster(name="s", host="h", known_hosts="/dev/null", users=(USER,),
                        recent_hours=1.0, checkpoint_roots=(), trial_roots=())


def _probe(collector: Collector) -> SlurmProbe:
    return SlurmProbe(_cluster(), clock=lambda: NOW, runner_factory=collector.factory)


def _shipped(request: dict[str, Any], squeue_bin: Path | None = None) -> str:
    env = dict(os.environ)
    if squeue_bin is not None:
        env["PATH"] = f"{squeue_bin}{os.pathsep}{env.get('PATH', '')}"
    run = subprocess.run(["python3", "-"], input=build_collector_script(request), env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    return run.stdout


def _queue_request(tmp: Path, squeue_bin: Path, *, listing: bool = False,
                   **over: Any) -> dict[str, Any]:
    probe = SlurmProbe(_cluster())
    request = probe._queue_request(NOW, [USER], None, False)
    request["squeue"]["since"] = 0
    request["squeue"]["listing"] = listing
    return {**request, **over}


def test_streamed_answer_is_the_document_answer(tmp_path: Path) -> None:
    """Streamed or one document, the collector answers the same: squeue, jobs, entries."""
    squeue_bin, ids = world(tmp_path, 5)
    request = _queue_request(tmp_path, squeue_bin)
    lines = _shipped(request, squeue_bin)
    whole = json.loads(_shipped({**request, "stream": False}, squeue_bin))
    assert len(lines.splitlines()) == 1 + len(ids) + 1  # head, one line per job, end
    reader = read_whole(lines)
    answer = reader.answer()
    assert answer is not None and reader.ended and not reader.missing
    assert list(answer["jobs"]) == ids
    for key in ids:  # equal but for the read times each run stamps
        assert answer["jobs"][key]["log"]["text"] == whole["jobs"][key]["log"]["text"]
        assert answer["jobs"][key].keys() == whole["jobs"][key].keys()
    assert answer["squeue"] == whole["squeue"] and answer["unexpanded"] == whole["unexpanded"]


def test_a_cut_or_garbled_line_fails_that_job_only(tmp_path: Path) -> None:
    """A line cut short, garbled, unannounced or repeated: never a crash, never a lost job."""
    squeue_bin, ids = world(tmp_path, 5)
    lines = _shipped(_queue_request(tmp_path, squeue_bin), squeue_bin).splitlines(True)
    head, jobs = lines[0], lines[1:-1]
    garbled = jobs[1].replace('{"log"', '{"log\x00', 1)
    forged = "9999\t" + jobs[0].split("\t", 1)[1]  # a job the head never announced
    repeated = jobs[0].replace('"status": "ok"', '"status": "failed"', 1)
    text = head + jobs[0] + garbled + forged + repeated + jobs[2] + jobs[3][:200]
    reader = read_whole(text)
    got = reader.answer()
    assert got is not None and not reader.ended
    assert got["jobs"][ids[0]]["log"]["status"] == "ok"  # the repeat did not overwrite it
    assert "unreadable" in got["jobs"][ids[1]]["log"]["error"]
    assert got["jobs"][ids[2]]["log"]["status"] == "ok"
    assert "cut short" in got["jobs"][ids[3]]["log"]["error"]
    assert "9999" not in got["jobs"] and reader.ignored == 2
    assert reader.missing == [ids[4]]


def test_an_unreadable_first_line_is_no_answer() -> None:
    for text in ("", "Killed\n", '{"protocol": 2, "part": "he', "[1, 2]\n"):
        reader = read_whole(text)
        assert reader.answer() is None and reader.missing == []


def test_budget_and_deadline_hold_in_the_stream(tmp_path: Path) -> None:
    """Budget counted from the bytes sent (head first); the deadline fails the jobs after it."""
    squeue_bin, ids = world(tmp_path, 6)
    free = _shipped(_queue_request(tmp_path, squeue_bin), squeue_bin)
    head_bytes = len(free.splitlines(True)[0].encode())
    entry = len(free.splitlines(True)[1].encode())
    budget = head_bytes + 2 * entry + entry // 2
    capped = _shipped(_queue_request(tmp_path, squeue_bin, answer_budget=budget), squeue_bin)
    got = read_whole(capped).answer()
    assert got is not None and list(got["jobs"]) == ids
    statuses = [got["jobs"][k]["log"]["status"] for k in ids]
    assert statuses == ["ok", "ok", "failed", "failed", "failed", "failed"]
    assert f"answer budget of {budget} bytes" in got["jobs"][ids[2]]["log"]["error"]
    assert len(capped.encode()) < budget + 4 * 400
    specs = [{"id": k, "user": USER, "stdout": str(tmp_path / "logs" / f"train_{k}.out"),
              "workdir": str(tmp_path)} for k in ids]
    late = _shipped({"tail_bytes": 1 << 20, "min_lines": 1, "deadline_s": 1e-9,
                     "stream": True, "jobs": specs})
    got = read_whole(late).answer()
    assert got is not None and list(got["jobs"]) == ids
    assert all("deadline" in got["jobs"][k]["log"]["error"] for k in ids)


async def test_streaming_gives_the_facts_folding_afterwards_gives(tmp_path: Path) -> None:
    """Folded as they arrived or after the whole answer: the same facts, job for job."""
    squeue_bin, ids = world(tmp_path, 6)
    streamed = await _probe(Collector(squeue_bin)).collect()
    whole = await _probe(Collector(squeue_bin, streaming=False)).collect()
    assert streamed.status == whole.status == "ok"
    assert [j.record.job_id for j in streamed.jobs] == ids
    mtimes = {j.record.job_id: j.log.mtime for j in whole.jobs if j.log}
    assert all(j.summary is not None and j.summary.points for j in streamed.jobs)
    for a, b in zip(streamed.jobs, whole.jobs, strict=True):
        assert a.log is not None and b.log is not None and a.log.mtime == mtimes[a.record.job_id]
        assert a == b
    assert streamed.round_trips == whole.round_trips == 2  # the collector and sacct


async def test_a_collector_killed_midway_keeps_what_it_sent(tmp_path: Path) -> None:
    """Killed after 2 jobs, every run: the jobs it answered stand, the others are collected
    again (2 more per run), and the ones no run reached are failed with the reason."""
    squeue_bin, ids = world(tmp_path, 8)
    collector = Collector(squeue_bin,
                          alter=lambda run, script: NO_LISTING + KILL_AFTER.format(n=2))
    facts = await _probe(collector).collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ids
    statuses = [j.log.status if j.log else None for j in facts.jobs]
    assert statuses == ["ok"] * 6 + ["failed"] * 2
    assert collector.runs == 3  # the one-trip run, then two for the jobs it did not reach
    for job in facts.jobs[6:]:
        assert job.log is not None and job.log.error is not None
        assert "stopped before this job" in job.log.error and "exited -9" in job.log.error
        assert job.summary is None  # fetch-failed, never "no metrics"


async def test_killed_once_then_the_rest_collected(tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 5)
    collector = Collector(squeue_bin, alter=lambda run, script: NO_LISTING + KILL_AFTER.format(
        n=1 if run == 1 else 99))
    facts = await _probe(collector).collect()
    assert [j.record.job_id for j in facts.jobs] == ids
    assert [j.log.status if j.log else None for j in facts.jobs] == ["ok"] * 5
    assert facts.round_trips == 3 and collector.runs == 2


async def test_a_garbled_line_in_transit_fails_that_job_only(tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 4)
    facts = await _probe(Collector(squeue_bin, garble=ids[2])).collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ids
    bad = facts.jobs[2]
    assert bad.log is not None and bad.log.status == "failed"
    assert bad.log.error is not None and "unreadable" in bad.log.error
    assert [j.log.status for j in facts.jobs if j is not bad and j.log] == ["ok"] * 3


async def test_jobs_are_parsed_before_the_answer_ends(tmp_path: Path) -> None:
    """The collector blocked after 3 jobs: those 3 are already parsed (folded into facts)
    while the command still runs; once released, the rest follow."""
    squeue_bin, ids = world(tmp_path, 7)
    release = tmp_path / "release"
    collector = Collector(squeue_bin, alter=lambda run, script: NO_LISTING + BLOCK_AFTER.format(
        n=3, release=str(release)))
    probe = SlurmProbe(_cluster(), clock=lambda: NOW)
    fold = folder(None, aliases={}, benign_patterns=())
    early = EarlyFolds(fold, cluster="s", now=NOW, users=(USER,), since=datetime(2000, 1, 1,
                                                                               tzinfo=UTC))
    reader = AnswerReader(on_head=early.head, on_job=early.job)
    script = build_collector_script(probe._queue_request(NOW, [USER], None, False))
    task = asyncio.ensure_future(stream_answer(collector, script, reader))
    for _ in range(3000):  # waits for the parse, whatever the machine's speed; not a timing
        if early.folded >= 3 or task.done():
            break
        await asyncio.sleep(0.01)
    assert early.folded == 3 and not task.done() and not reader.ended
    assert sorted(reader.jobs) == ids[:3]
    release.write_text("go")
    res = await task
    assert res.exit_status == 0 and reader.ended and early.folded == 7


async def test_the_fallback_streams_a_runner_without_it(tmp_path: Path) -> None:
    """``run_streaming`` on a runner with ``run`` only: its whole stdout, as one chunk."""
    squeue_bin, _ = world(tmp_path, 2)
    chunks: list[bytes] = []
    res = await run_streaming(_RunOnly(Collector(squeue_bin)), ["python3", "-"],
                              stdin="print('a'); print('b')", on_chunk=chunks.append)
    assert res.exit_status == 0 and res.stdout == "" and chunks == [b"a\nb\n"]


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_lines_split_across_any_chunks(size: int) -> None:
    """However the bytes are cut into chunks, the same lines come out."""
    from probes.slurm.answer import LineSplitter

    text = b"head\n" + b"".join(b"%d\t{}\n" % n for n in range(300)) + b"tail"
    got: list[tuple[bytes, bool]] = []
    splitter = LineSplitter(lambda raw, cut: got.append((raw, cut)))
    for at in range(0, len(text), size):
        splitter.feed(text[at:at + size])
    splitter.close()
    assert got == [(line, False) for line in text.split(b"\n")[:-1]] + [(b"tail", True)]
