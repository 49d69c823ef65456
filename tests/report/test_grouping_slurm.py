"""Grouping on the real SLURM 22.05: a 500-task array (`sbatch --array=0-499`) swept over SSH
is one row per table with all 500 tasks counted, and fits one Slack message.

The array sleeps briefly; it is cancelled (only its own id) when the module ends. slurmd runs
64 tasks at a time here, so the sweep sees running tasks and SLURM's unsplit pending record
(``array_task_string``), which the grouping counts task by task.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config_file import load_config
from bot.sweep import Sweeper
from bot.sweep_result import SweepResult
from probes.slurm.transport import SshRunner
from report.chunks import slack_messages
from report.grouping import (
    ATTENTION,
    find_groups,
    group_report,
    groups_json,
    pending_task_counts,
)
from report.tables import render_tables
from tests.probes.slurm.conftest import SlurmEnv, slurm_env  # noqa: F401  (the fixture)

TASKS = 500


@dataclass
class Swept:
    name: str
    array_id: str
    result: SweepResult


async def _run(env: SlurmEnv, argv: list[str]) -> str:
    runner = SshRunner(env.cluster())
    try:
        return (await runner.run(argv, check=False)).stdout
    finally:
        await runner.aclose()


def _config(env: SlurmEnv, tmp: Path) -> Path:
    return env.config_toml(tmp, recent_hours=1, timeout_s=180, command_timeout_s=120)


@pytest.fixture(scope="module")
def swept(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
          ) -> Iterator[Swept]:
    name = f"datagen-arr-{secrets.token_hex(3)}"
    out = asyncio.run(_run(slurm_env, [
        "sbatch", "--parsable", f"--array=0-{TASKS - 1}", "-J", name, "-o", "/dev/null",
        "--chdir", "/tmp", "--wrap", "sleep 120"]))
    array_id = out.strip().split(";")[0]
    assert array_id.isdigit(), out
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # bounded: until slurmctld has started some tasks
            listing = asyncio.run(_run(slurm_env, ["squeue", "-h", "-r", "-n", name,
                                                   "-t", "RUNNING", "-o", "%i"]))
            if listing.split():
                break
            time.sleep(2)
        config = load_config(_config(slurm_env, tmp_path_factory.mktemp("grouping")))

        async def sweep() -> SweepResult:
            sweeper = Sweeper(lambda: config)
            try:
                return await sweeper.sweep()
            finally:
                await sweeper.aclose()

        yield Swept(name, array_id, asyncio.run(sweep()))
    finally:
        asyncio.run(_run(slurm_env, ["scancel", array_id]))


def _ours(swept: Swept) -> SweepResult:
    result = swept.result
    jobs = [j for j in result.report.jobs if j.name == swept.name]
    report = result.report.model_copy(update={"jobs": jobs, "grid": []})
    return SweepResult(report=report, details={k: d for k, d in result.details.items()
                                               if d.report.name == swept.name},
                       facts=result.facts, started_at=result.started_at,
                       duration_s=result.duration_s)


def test_all_500_tasks_are_counted_in_groups(swept: Swept) -> None:
    """Running tasks plus the unsplit pending record add up to exactly 500 tasks."""
    ours = _ours(swept)
    assert ours.report.jobs, "the array is missing from the sweep"
    groups = find_groups(ours.report, pending_tasks=pending_task_counts(ours.facts))
    assert groups and all(g.key == swept.array_id for g in groups)
    assert all(g.exact for g in groups)
    assert sum(n for g in groups for _, n in g.counts) == TASKS
    states = {s for g in groups for s, _ in g.counts}
    assert "RUNNING" in states


def test_the_array_is_one_row_per_table_and_one_message(swept: Swept) -> None:
    """Grouped, the array's tables carry one row per table and fit one Slack message."""
    ours = _ours(swept)
    grouped, details = group_report(ours.report, ours.details,
                                    pending_tasks=pending_task_counts(ours.facts))
    tables = render_tables(grouped, details, width=100)
    rows = [line for t in tables for line in t.text.splitlines() if swept.name in line]
    attention = [j for j in grouped.jobs if j.verdict in ATTENTION]
    assert len(rows) == len(tables) + len(attention)
    messages = slack_messages(tables)
    assert len(messages) == 1
    assert len(slack_messages(render_tables(ours.report, ours.details, width=100))) > 1
    label = groups_json(ours.report, pending_tasks=pending_task_counts(ours.facts))[0]["label"]
    assert label.startswith(f"{swept.name} [") and "running" in label
