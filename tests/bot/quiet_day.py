"""A day on one SLURM cluster, as the bot's real sweep reads it: the quiet tests' world.

The jobs' logs are written in their trainers' own console formats (verl 0.9's
``step:N - key:np.float64(v)`` lines behind Ray's ``(TaskRunnerV1 pid=N)`` prefix, the HF
Trainer's tqdm bar and ``{'loss': '...'}`` dicts) and parsed by the real ``parse_log``; the
datagen and eval jobs' Harbor trial trees are the collector's :class:`TrialTree`. A fake probe
hands the real :class:`bot.sweep.Sweeper` (real judge, real Redis state) the cluster as it
stands at the fake clock's time; :class:`World` moves the jobs on between sweeps.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bot.config import Config, RedisSection, SlackSection
from bot.config_source import ConfigSource
from bot.scheduled import scheduled_sweep
from bot.scheduler import interval_number
from bot.store import RedisStore
from bot.sweep import Sweeper
from probes.config import SlurmCluster
from probes.logs.parse import parse_log
from probes.models import (
    ClusterFacts,
    JobFacts,
    JobState,
    LogFetch,
    SchedulerRecord,
    TrialResult,
    TrialTree,
)

PID = 247607


def verl_line(step: int, values: Mapping[str, float]) -> str:
    """One verl 0.9 console line (LocalLogger's ``concat_dict_to_str`` of pformat'd values)."""
    parts = [f"step:{step}"]
    for key, value in values.items():
        parts.append(f"{key}:np.float64({value!r})")
    return f"(TaskRunnerV1 pid={PID}) " + " - ".join(parts)


def verl_log(total: int, steps: list[dict[str, float]]) -> str:
    head = [f"(TaskRunnerV1 pid={PID}) Size of train dataloader: {total}, Size of val "
            "dataloader: 1", f"(TaskRunnerV1 pid={PID}) Total training steps: {total}"]
    body = []
    for i, values in enumerate(steps, start=1):
        body.append(verl_line(i, values))
        pct = int(100 * i / total)
        body.append(f"(TaskRunnerV1 pid={PID}) Training Progress: {pct:3d}%|          | "
                    f"{i}/{total} [00:{i:02d}<00:10, 41.2s/it]")
    return "\n".join(head + body) + "\n"


def hf_log(total: int, losses: list[tuple[float, float]], *, first: int = 1) -> str:
    """HF Trainer (transformers 5.x) stdout: the bar and one string-valued dict a step, from
    step ``first`` (a run resumed from its checkpoint, or a log's tail)."""
    lines = [f"  0%|          | 0/{total} [00:00<?, ?it/s]"]
    for i, (loss, grad) in enumerate(losses, start=first):
        lines.append(f"{int(100 * i / total):3d}%|          | {i}/{total} [00:{i % 60:02d}<"
                     f"00:10, 11.64s/it]{' ' * 46}{{'loss': '{loss:.4g}', 'grad_norm': "
                     f"'{grad:.4g}', 'learning_rate': '1e-05', 'epoch': '{i / total:.4g}'}}")
    return "\n".join(lines) + "\n"


@dataclass
class Job:
    """One job as the fake scheduler and filesystem hold it."""

    job_id: str
    name: str
    user: str
    state: JobState = JobState.RUNNING
    started: datetime | None = None
    ended: datetime | None = None
    dependency: str | None = None
    text: str = ""
    trials: TrialTree | None = None
    fetch_error: bool = False
    time_limit_s: int | None = None
    restarts: int = 0
    discarded: bool = False
    """Submitted ``-o /dev/null``: no log (the collector finds none of its own either)."""

    def facts(self, now: datetime) -> JobFacts:
        record = SchedulerRecord(
            cluster="alpha", job_id=self.job_id, name=self.name, user=self.user,
            state=self.state, submit_time=(self.started or now) - timedelta(minutes=5),
            start_time=self.started, end_time=self.ended,
            elapsed_s=int(((self.ended or now) - self.started).total_seconds())
            if self.started else None, time_limit_s=self.time_limit_s, restarts=self.restarts,
            workdir=f"/w/{self.name}", stdout_path="/dev/null" if self.discarded
            else f"/w/{self.name}/{self.job_id}.out",
            dependency=self.dependency,
            depends_on=(self.dependency.split(":", 1)[1],) if self.dependency else (),
            reason="Dependency" if self.dependency and self.state is JobState.PENDING
            else None)
        if self.state is JobState.PENDING:
            return JobFacts(record=record)
        path = record.stdout_path
        if self.discarded:
            return JobFacts(record=record, trials=self.trials,
                            log=LogFetch(requested_path=path, status="missing"))
        if self.fetch_error:
            fetch = LogFetch(requested_path=path, path=path, status="failed",
                             error="ssh: channel closed while reading", attempts=2)
            return JobFacts(record=record, log=fetch, trials=self.trials)
        fetch = LogFetch(requested_path=path, path=path, status="ok", mtime=now,
                         size=len(self.text), text=self.text)
        summary = parse_log(self.text, mtime=now)
        return JobFacts(record=record, log=fetch.model_copy(update={"text": self.text[-16000:]}),
                        summary=summary, trials=self.trials)


@dataclass
class World:
    """The cluster through the day. ``tick`` moves it on to the next sweep's time."""

    start: datetime
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    jobs: dict[str, Job] = field(default_factory=dict)
    series: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    sft: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    unreachable: bool = False
    unreachable_detail: str = "ssh: connect to 127.0.0.1 port 2222: Connection refused"
    sweep: int = 0
    events: dict[int, Callable[[World], None]] = field(default_factory=dict)
    rl_step: Callable[[World, str, int], dict[str, float]] | None = None

    def now(self) -> datetime:
        return self.start + timedelta(minutes=30 * self.sweep)

    def add(self, job: Job) -> None:
        self.jobs[job.job_id] = job

    def collect(self) -> ClusterFacts:
        now = self.now()
        if self.unreachable:
            return ClusterFacts(name="alpha", kind="slurm", status="unreachable",
                                detail=self.unreachable_detail,
                                collected_at=now)
        return ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=now,
                            jobs=tuple(j.facts(now) for j in self.jobs.values()))


def trial_tree(done: int, total: int, now: datetime, *, rng: random.Random,
               chunks: tuple[int, int] | None = None, newest: datetime | None = None,
               ) -> TrialTree:
    """A Harbor jobs/ tree with ``done`` result.json files (rewards ~40 % solved, ~20 %
    AgentTimeoutError, 4-7 turns)."""
    state = random.Random(total)  # each trial the same at every sweep
    trials = []
    for i in range(done):
        exc = "AgentTimeoutError" if state.random() < 0.2 else None
        reward = 1.0 if state.random() < 0.4 else 0.0
        fin = now - timedelta(minutes=2 * (done - i))
        trials.append(TrialResult(name=f"task_{i:04d}__{i:x}", reward=reward,
                                  exception_type=exc, n_turns=state.randint(4, 7),
                                  n_output_tokens=state.randint(800, 4000),
                                  started_at=fin - timedelta(minutes=9), finished_at=fin))
    return TrialTree(root="/w/jobs", trials=tuple(trials), trials_total=total,
                     newest_result_at=newest or (trials[-1].finished_at if trials else None),
                     chunks_done=chunks[0] if chunks else None,
                     chunks_total=chunks[1] if chunks else None)


def metrics(rng: random.Random, **centre: float) -> dict[str, float]:
    """Noisy verl metrics around ``centre`` (entropy, grad_norm, score)."""
    return {
        "actor/entropy": round(centre.get("entropy", 0.62) * (1 + rng.gauss(0, 0.04)), 5),
        "actor/pg_loss": round(rng.gauss(-0.01, 0.004), 5),
        "actor/pg_clipfrac": round(abs(rng.gauss(0.0012, 0.0003)), 6),
        "actor/grad_norm": round(centre.get("grad_norm", 0.2) * (1 + rng.gauss(0, 0.08)), 5),
        "critic/score/mean": round(centre.get("score", 0.4) + rng.gauss(0, 0.03), 5),
    }


class WorldProbe:
    """The :class:`probes.base.ClusterProbe` the real Sweeper asks: the world as it stands."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def collect(self, *, offsets: Any = None) -> ClusterFacts:
        return self.world.collect()

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        job = self.world.jobs[job_id]
        job.state, job.ended = JobState.CANCELLED, self.world.now()

    async def aclose(self) -> None:
        return None


OWNERS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL"}
CHANNEL = "C0SWEEP"


def shown(params: Mapping[str, Any]) -> str:
    """What Slack shows for a post or an edit: its blocks' text, else its ``text``."""
    from tests.bot.builders import blocks_text

    blocks = params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return blocks_text(blocks) if blocks else str(params.get("text", ""))


@dataclass
class Day:
    """A bot whose real Sweeper reads ``world``; ``sweep`` runs the next scheduled sweep
    (and its retry a minute later when it asks for one, as ``bot.scheduler`` does)."""

    harness: Any
    world: World
    clock: Any
    slack: Any

    async def sweep(self) -> None:
        self.clock.now = self.world.now()
        interval = interval_number(self.clock(), 1800)
        if not await scheduled_sweep(self.harness.bot, interval):
            self.clock.now += timedelta(seconds=60)
            await scheduled_sweep(self.harness.bot, interval, retry=True)

    def visible(self) -> list[tuple[str, str]]:
        """Every call that shows a message: (kind, text); kind is ``post`` (top level in the
        channel), ``reply`` (in a thread), ``dm`` (to a DM channel) or ``edit``."""
        out = []
        for call in self.slack.calls:
            if call.path == "/api/chat.update":
                out.append(("edit", shown(call.params)))
            elif call.path == "/api/chat.postMessage":
                channel = str(call.params.get("channel", ""))
                kind = ("reply" if call.params.get("thread_ts") else
                        "post" if channel == CHANNEL else "dm")
                out.append((kind, shown(call.params)))
        return out

    def replies(self) -> list[str]:
        return [text for kind, text in self.visible() if kind == "reply"]

    def dms(self) -> list[str]:
        return [text for kind, text in self.visible() if kind == "dm"]


@asynccontextmanager
async def quiet_day(slack: Any, store: RedisStore, world: World, tmp_path: Path,
                    ) -> AsyncIterator[Day]:
    """The bot over ``world`` (cluster alpha, owners alice/bob/carol with job-end DMs on)."""
    from tests.bot.builders import FakeClock
    from tests.bot.conftest import notify_on, running_bot

    clock = FakeClock(world.now())
    cluster = SlurmCluster(name="alpha", host="h", known_hosts="/dev/null",
                           users=tuple(OWNERS))
    config = Config(clusters=(cluster,), redis=RedisSection(key_prefix=store.prefix),
                    slack=SlackSection(channel=CHANNEL, operators=("UOPS",), owners=OWNERS,
                                       incident_dir=str(tmp_path / "incidents")))
    sweeper = Sweeper(lambda: config, state=store, clock=clock,
                      probe_factory=lambda c, **kw: WorldProbe(world))
    await notify_on(store, *OWNERS.values())
    async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                           config=ConfigSource.fixed(config)) as harness:
        yield Day(harness, world, clock, slack)
