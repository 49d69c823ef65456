"""Warm bot sweeps of a real SLURM job run as a batch script with arguments (``job.sh
--ckpt_path DIR``, as real jobs run), over real SSH with a real Redis: the save folder its
command line names is searched on the first sweep, then carried in the log cursor the bot
stores and not searched again while it is unchanged (the collector answers ``"same"``); a
new save is banked on the very next warm sweep, and a removed folder banks nothing.

The job runs as the unprivileged test user and only sleeps: the test makes its saves itself
(as the trainer would), their times set an hour back as the next sweep meets an earlier save.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.store import RedisStore
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_incremental_sweep import Bot, _bot, _cancel, _wait_running


class Job:
    def __init__(self, job_id: str, ckpt: Path, user: str) -> None:
        self.id, self.ckpt, self.user = job_id, ckpt, user

    def save(self, step: int) -> None:
        """A save made an hour ago (its folder's mtime with it), as the job's user's."""
        when = time.time() - 3600
        path = self.ckpt / f"global_step_{step}"
        path.mkdir(parents=True)
        for made in (self.ckpt, path):
            shutil.chown(made, self.user, self.user)
            os.utime(made, (when, when))
        os.utime(self.ckpt, (when + step, when + step))  # each save later than the last


@pytest.fixture(scope="module")
def job(slurm_env: SlurmEnv) -> Iterator[Job]:
    tag = secrets.token_hex(3)
    base = Path(slurm_env.other_scratch) / f"warmckpt-{tag}"
    base.mkdir(parents=True)
    script = base / "job.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    for path in (base, script):
        shutil.chown(path, slurm_env.other_user, slurm_env.other_user)
        path.chmod(0o755)
    ckpt = base / "scratch" / "ckpt"
    run = subprocess.run(
        ["sbatch", "--parsable", f"--uid={slurm_env.other_user}",
         f"--gid={slurm_env.other_user}", "-J", f"warmckpt-{tag}", "-o", f"{base}/train_%j.out",
         "--chdir", str(base), "--time=10", str(script), "--ckpt_path", str(ckpt)],
        capture_output=True, text=True, check=True, timeout=60)
    job_id = run.stdout.strip().split(";")[0]
    try:
        _wait_running([job_id])
        made = Job(job_id, ckpt, slurm_env.other_user)
        made.save(10)
        yield made
    finally:
        _cancel([job_id])
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def bot(slurm_env: SlurmEnv, redis_server: str) -> AsyncIterator[Bot]:
    store = RedisStore(aioredis.Redis.from_url(redis_server),
                       prefix=f"jt-test-{uuid.uuid4().hex[:10]}:")
    made = _bot(slurm_env, store, name="warmckpt")
    try:
        yield made
    finally:
        await made.sweeper.aclose()
        await store.delete_prefix()
        await store.aclose()


def _steps(facts: dict[str, Any], job: Job) -> tuple[int, ...]:
    listing = facts[job.id].checkpoints
    return listing.steps if listing is not None else ()


async def test_a_named_folder_is_carried_and_a_new_save_seen_next_sweep(
        bot: Bot, job: Job) -> None:
    assert _steps(await bot.sweep(), job) == (10,)
    first = bot.tap.log(job.id)["cursor"]
    assert first["dirs"] == [str(job.ckpt)] and isinstance(first["ckpt"], list)
    assert _steps(await bot.sweep(), job) == (10,)
    assert bot.tap.log(job.id)["cursor"]["ckpt"] == "same"  # not searched: the record stands
    stored = (await bot.store.load_log_states("warmckpt"))[job.id]
    assert [r["place"] for r in stored.cursor.ckpt] == [r["place"] for r in first["ckpt"]]
    job.save(20)
    assert _steps(await bot.sweep(), job) == (10, 20)  # the very next warm sweep
    assert bot.tap.log(job.id)["cursor"]["ckpt"] != "same"
    assert _steps(await bot.sweep(), job) == (10, 20)
    shutil.rmtree(job.ckpt)
    assert _steps(await bot.sweep(), job) == ()
