"""Warm bot sweeps on the real SLURM 22.05 over real SSH with a real Redis: each sweep reads
only the bytes appended to a running job's log since the last one, summarises them exactly as
a cold read of the whole log does, and reads a rotated, truncated, rewritten log, or one whose
stored state is corrupt, afresh; Redis round trips per sweep do not grow with the jobs.

Jobs run as the unprivileged test user (``sbatch --uid`` as root) and only sleep: the test
writes their logs itself (as a trainer would append), so every byte is known. What the
collector sent is read from its answer, tapped at the runner (the real SSH runner's output).
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import ConnectionPool

from bot.config import Config
from bot.store import RedisStore
from bot.sweep import Sweeper
from probes.config import SlurmCluster
from probes.models import JobFacts, LogSummary
from probes.slurm.answer import read_whole
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import CommandResult, Runner, make_runner
from tests.bot.conftest import CountingConnection
from tests.probes.slurm.conftest import SlurmEnv, closed_port
from tests.probes.slurm.forwarding import ForwardingRunner

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SFT = (FIX / "hf-transformers-5.24.0" / "sft_healthy.out").read_bytes()
GRPO = (FIX / "trl-1.16.0" / "grpo_healthy.out").read_bytes()
COLLAPSE = (FIX / "trl-1.16.0" / "grpo_collapse.out").read_bytes()
KEYS = ("append", "rotate", "truncate", "rewrite", "corrupt", "count")


@dataclass(frozen=True)
class Jobs:
    """The sleeping jobs (as the test user) and their logs, which the tests write."""

    ids: dict[str, str]
    base: Path
    user: str
    more: list[str]
    """Three more sleeping jobs, as the bot's own login user (a wider sweep's extra jobs)."""

    def log(self, key: str) -> Path:
        return self.base / f"{key}_{self.ids[key]}.out"

    def write(self, key: str, data: bytes, *, mode: str = "wb") -> None:
        """Write (or with ``ab`` append to) a job's log as its owner's file."""
        path = self.log(key)
        with path.open(mode) as fh:
            fh.write(data)
        shutil.chown(path, self.user, self.user)
        path.chmod(0o644)


def _sbatch(user: str, base: Path, key: str, tag: str) -> str:
    run = subprocess.run(
        # --open-mode=append: slurmstepd opens the StdOut it creates a moment after the job
        # reads RUNNING; truncating it then would wipe what a test already wrote (a flake).
        ["sbatch", "--parsable", f"--uid={user}", f"--gid={user}", "-J", f"incr-{key}-{tag}",
         "-o", f"{base}/{key}_%j.out", "--open-mode=append", "--chdir", str(base), "--time=10",
         str(base / "job.sh")],
        capture_output=True, text=True, check=True, timeout=60)
    return run.stdout.strip().split(";")[0]


def _wait_running(ids: Sequence[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", ",".join(ids)],
                             capture_output=True, text=True, check=False).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(i) == "RUNNING" for i in ids):
            return
        time.sleep(1)
    pytest.fail(f"jobs did not start: {ids}")


def _cancel(ids: Sequence[str]) -> None:
    subprocess.run(["scancel", *ids], check=False, timeout=60)


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[Jobs]:
    """One sleeping job per test, each with an (empty) StdOut the test fills."""
    tag = secrets.token_hex(3)
    base = Path(slurm_env.other_scratch) / f"incr-{tag}"
    base.mkdir(parents=True)
    script = base / "job.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    for path in (base, script):
        shutil.chown(path, slurm_env.other_user, slurm_env.other_user)
        path.chmod(0o755)
    own = Path(slurm_env.scratch) / f"incr-{tag}"
    own.mkdir(parents=True)
    shutil.copy(script, own / "job.sh")
    for path in (own, own / "job.sh"):
        shutil.chown(path, slurm_env.user, slurm_env.user)
    ids: dict[str, str] = {}
    more: list[str] = []
    try:
        ids.update({key: _sbatch(slurm_env.other_user, base, key, tag) for key in KEYS})
        more += [_sbatch(slurm_env.user, own, f"more{n}", tag) for n in range(3)]
        _wait_running([*ids.values(), *more])  # all at once: one wait for node slots
        yield Jobs(ids, base, slurm_env.other_user, more)
    finally:
        if ids or more:
            _cancel([*ids.values(), *more])
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(own, ignore_errors=True)


class Tap:
    """A runner factory over the real one that keeps every collector answer."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    def factory(self, cluster: SlurmCluster) -> Runner:
        return _Tapped(make_runner(cluster), self.answers)

    def log(self, job_id: str) -> dict[str, Any]:
        """The latest collector answer's log entry for ``job_id``."""
        found: dict[str, Any] = next(a["jobs"][job_id]["log"] for a in reversed(self.answers)
                                     if job_id in a.get("jobs", {}))
        return found


class _Tapped(ForwardingRunner):
    def __init__(self, inner: Runner, answers: list[dict[str, Any]]) -> None:
        super().__init__(inner)
        self._answers = answers

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        result = await super().run(argv, stdin=stdin, check=check)
        if list(argv) == ["python3", "-I", "-"] and result.exit_status == 0:
            # The streamed answer (probes.slurm.answer), read whole as a document.
            answer = read_whole(result.stdout).answer()
            assert answer is not None, result.stdout[:300]
            self._answers.append(answer)
        return result

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        """The streamed answer as the probe reads it, noted whole as well."""
        chunks: list[bytes] = []

        def tee(chunk: bytes) -> None:
            chunks.append(chunk)
            on_chunk(chunk)

        result = await super().run_streaming(argv, stdin=stdin, on_chunk=tee)
        if list(argv) == ["python3", "-I", "-"] and result.exit_status == 0:
            answer = read_whole(b"".join(chunks).decode("utf-8")).answer()
            assert answer is not None
            self._answers.append(answer)
        return result


@dataclass
class Bot:
    """The bot's sweeper on the test cluster with a real Redis store, and what it saw."""

    sweeper: Sweeper
    store: RedisStore
    tap: Tap
    cluster: SlurmCluster

    async def sweep(self) -> dict[str, JobFacts]:
        result = await self.sweeper.sweep()
        assert result.degraded is None, result.degraded
        (facts,) = result.facts
        assert facts.status == "ok", facts.detail
        return {job.record.job_id: job for job in facts.jobs}

    async def cold(self, job_id: str) -> LogSummary | None:
        """The summary a cold, CLI-style sweep (no state, ``parse_log``) gives that job now."""
        facts = await SlurmProbe(self.cluster).collect()
        return next(j.summary for j in facts.jobs if j.record.job_id == job_id)


def _bot(env: SlurmEnv, store: RedisStore, *, name: str = "incr",
         users: tuple[str, ...] = ()) -> Bot:
    tap = Tap()
    cluster = env.cluster(name, users=users or (env.other_user,), recent_hours=1.0)

    def probe(c: SlurmCluster, **kw: Any) -> SlurmProbe:
        return SlurmProbe(c, runner_factory=tap.factory, **kw)

    return Bot(Sweeper(lambda: Config(clusters=(cluster,)), state=store, probe_factory=probe),
               store, tap, cluster)


@pytest.fixture
async def bot(slurm_env: SlurmEnv, redis_server: str) -> AsyncIterator[Bot]:
    """A bot sweeper on the test cluster, its Redis keys under a prefix of its own."""
    pool = ConnectionPool.from_url(redis_server, connection_class=CountingConnection)
    store = RedisStore(aioredis.Redis(connection_pool=pool),
                       prefix=f"jt-test-{uuid.uuid4().hex[:10]}:")
    made = _bot(slurm_env, store)
    try:
        yield made
    finally:
        await made.sweeper.aclose()
        await store.delete_prefix()
        await store.aclose()


def _lines(data: bytes, fraction: float) -> tuple[bytes, bytes]:
    """``data`` cut at the line boundary nearest ``fraction`` of its lines."""
    lines = data.splitlines(keepends=True)
    cut = int(len(lines) * fraction)
    return b"".join(lines[:cut]), b"".join(lines[cut:])


async def test_a_warm_sweep_reads_only_the_appended_bytes(bot: Bot, jobs: Jobs) -> None:
    """Cold, then the rest of the log appended: the collector sends exactly those bytes, the
    summary is the cold read's of the whole log, and an unchanged log sends no text."""
    job_id = jobs.ids["append"]
    first, rest = _lines(SFT, 0.6)
    jobs.write("append", first)
    await bot.sweep()
    assert bot.tap.log(job_id)["fresh"] == "new"
    jobs.write("append", rest, mode="ab")
    warm = (await bot.sweep())[job_id]
    sent = bot.tap.log(job_id)
    assert sent["continued"] is True and "fresh" not in sent
    assert sent["text"] == rest.decode() and sent["offset"] == len(first)
    assert warm.summary == await bot.cold(job_id)
    assert warm.summary is not None and warm.summary.points
    again = (await bot.sweep())[job_id]
    assert "text" not in bot.tap.log(job_id) and bot.tap.log(job_id)["lines"] == 0
    assert again.summary == warm.summary
    stored = {p.step for p in await bot.store.load_history("incr", job_id)}
    assert {p.step for p in warm.summary.points} <= stored


async def test_a_lost_history_window_is_filled_again(bot: Bot, jobs: Jobs) -> None:
    """Warm sweeps send only changed points to the history; if Redis loses a job's window
    (a flush, a failover without the latest writes), the next sweeps send them all again."""
    job_id = jobs.ids["append"]
    jobs.write("append", SFT)
    first = (await bot.sweep())[job_id]
    assert first.summary is not None and first.summary.points
    steps = {p.step for p in first.summary.points}
    await bot.store._r.delete(bot.store.key("window", "incr", job_id))
    await bot.sweep()
    await bot.sweep()
    assert steps <= {p.step for p in await bot.store.load_history("incr", job_id)}


def _rotate(jobs: Jobs) -> None:
    log = jobs.log("rotate")
    log.rename(log.with_name(log.name + ".1"))
    jobs.write("rotate", COLLAPSE)


def _truncate(jobs: Jobs) -> None:
    with jobs.log("truncate").open("r+b") as fh:
        fh.truncate(2000)
    jobs.write("truncate", COLLAPSE[:3000], mode="ab")


def _rewrite(jobs: Jobs) -> None:
    """Same size, another first line: replaced in place."""
    data = jobs.log("rewrite").read_bytes()
    jobs.write("rewrite", b"#" + data[1:])


@pytest.mark.parametrize(("key", "change", "reason"), [
    ("rotate", _rotate, "rotated"), ("truncate", _truncate, "truncated"),
    ("rewrite", _rewrite, "rewritten"),
])
async def test_a_changed_log_is_detected_and_read_afresh(
        bot: Bot, jobs: Jobs, key: str, change: Callable[[Jobs], None], reason: str) -> None:
    """Rotated (mv + a new file), truncated, or rewritten in place at the same size: the
    collector says why and sends a fresh tail, summarised as a cold read."""
    job_id = jobs.ids[key]
    jobs.write(key, GRPO)
    await bot.sweep()
    change(jobs)
    warm = (await bot.sweep())[job_id]
    sent = bot.tap.log(job_id)
    assert sent["fresh"] == reason and "continued" not in sent
    assert sent["offset"] == 0 and sent["text"] == jobs.log(key).read_bytes().decode()
    assert warm.summary == await bot.cold(job_id)


async def test_a_corrupt_stored_state_is_a_fresh_read(
        bot: Bot, jobs: Jobs, slurm_env: SlurmEnv) -> None:
    """A stored state that does not validate is dropped when a (restarted) bot reads Redis:
    no cursor is sent, the log is read afresh and summarised as a cold read."""
    job_id = jobs.ids["corrupt"]
    first, rest = _lines(GRPO, 0.5)
    jobs.write("corrupt", first)
    await bot.sweep()
    key = bot.store.key("logs", "incr")
    stored = await bot.store._r.hget(key, job_id)
    assert stored is not None
    await bot.store._r.hset(key, job_id, stored[: len(stored) // 2])
    jobs.write("corrupt", rest, mode="ab")
    restarted = _bot(slurm_env, bot.store)
    try:
        warm = (await restarted.sweep())[job_id]
    finally:
        await restarted.sweeper.aclose()
    assert restarted.tap.log(job_id)["fresh"] == "new"
    assert restarted.tap.log(job_id)["text"] == GRPO.decode()
    assert warm.summary == await bot.cold(job_id)


async def test_a_restarted_bot_resumes_from_redis(
        bot: Bot, jobs: Jobs, slurm_env: SlurmEnv) -> None:
    """The states outlive the process: a new bot on the same Redis resumes where the old
    one stopped (only the appended bytes sent), summarised as a cold read."""
    job_id = jobs.ids["corrupt"]
    first, rest = _lines(SFT, 0.3)
    jobs.write("corrupt", first)
    await bot.sweep()
    jobs.write("corrupt", rest, mode="ab")
    restarted = _bot(slurm_env, bot.store)
    try:
        warm = (await restarted.sweep())[job_id]
    finally:
        await restarted.sweeper.aclose()
    sent = restarted.tap.log(job_id)
    assert sent["continued"] is True and sent["text"] == rest.decode()
    assert warm.summary == await bot.cold(job_id)


async def test_redis_round_trips_per_sweep_do_not_grow_with_the_jobs(
        bot: Bot, jobs: Jobs, slurm_env: SlurmEnv) -> None:
    """A warm sweep's Redis round trips (counted on the real connection) are the same when
    the sweep also takes the bot account's jobs (at least three more running ones, and
    whatever else it runs): loads and saves are pipelined per cluster."""
    jobs.write("count", GRPO)

    async def warm_sweep(made: Bot) -> tuple[int, int]:
        await made.sweep()  # a cold sweep, or a warm one: either way, then a warm one
        jobs.write("count", b"{'loss': 0.1, 'epoch': 2.0}\n", mode="ab")
        before = CountingConnection.sent
        swept = await made.sweep()
        return CountingConnection.sent - before, len(swept)

    trips, seen = await warm_sweep(bot)
    wide = _bot(slurm_env, bot.store, name="incr-wide",
                users=(slurm_env.other_user, slurm_env.user))
    try:
        more_trips, more_seen = await warm_sweep(wide)
    finally:
        await wide.sweeper.aclose()
    assert set(jobs.more) <= {j for a in wide.tap.answers for j in a.get("jobs", {})}
    assert more_seen >= seen + 3
    assert more_trips == trips <= 6


async def test_without_redis_the_sweep_reads_cold_and_says_so(
        slurm_env: SlurmEnv, jobs: Jobs) -> None:
    """Redis unreachable: the sweep still answers, every log read whole, marked degraded."""
    client = aioredis.Redis(host="127.0.0.1", port=closed_port(), socket_timeout=1.0,
                            socket_connect_timeout=1.0)
    made = _bot(slurm_env, RedisStore(client, prefix="jt-test-down:"))
    jobs.write("append", SFT)
    try:
        result = await made.sweeper.sweep()
    finally:
        await made.sweeper.aclose()
        await client.aclose()
    assert result.degraded is not None and result.degraded.startswith("degraded")
    job_id = jobs.ids["append"]
    (facts,) = result.facts
    warm = next(j for j in facts.jobs if j.record.job_id == job_id)
    assert "cursor" not in made.tap.log(job_id) and made.tap.log(job_id)["text"] == SFT.decode()
    assert warm.summary == await made.cold(job_id)
