"""`jobtables probe ID` on a job that is no RL run: it says the deep probe does not apply.

The SLURM read is replaced by canned facts (``probes.deep_read.read_job``, the one call that
touches the cluster), so the command runs its real path from argv to output. An SFT or eval job
gets no verdict (never a NO-KILL that reads "checked, healthy", never a KILL from RL rules on
eval trials); exit 0, as the row was read and reported; JSON stays the contract's job object,
without ``deep_probe`` since no probe ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import probes.deep_read
from bot.cli import main
from probes.models import JobFacts, JobState, LogFetch, LogSummary, SchedulerRecord
from probes.rollouts import RolloutFacts, TrialSample, TrialSampleSet
from tests.cli.test_cli import JOB_KEYS

CONFIG = '[[clusters]]\nname = "alpha"\nkind = "slurm"\nlocal = true\n'
_ERRORED = TrialSampleSet(roots=("/w/jobs",), listed=40, sampled=tuple(
    TrialSample(name=f"t{i}", exception_type="AgentTimeoutError") for i in range(8)))
"""Every sampled trial timed out: RL rules would call it "zero trials completing" (KILL)."""


def _facts(name: str) -> JobFacts:
    record = SchedulerRecord(cluster="alpha", job_id="4242", name=name, user="alice",
                             state=JobState.RUNNING, workdir="/w", elapsed_s=3600)
    return JobFacts(record=record, log=LogFetch(status="ok", path="/w/4242.out", text="x\n"),
                    summary=LogSummary(line_count=1))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The probe's cluster read, canned: the job named by ``reads[0]``, its trials errored."""
    names: list[str] = []

    async def read_job(cluster: Any, job_id: str, plan: Any, **_: Any
                       ) -> tuple[JobFacts, RolloutFacts, tuple[JobFacts, ...]]:
        return _facts(names[0]), RolloutFacts(log_path="/w/4242.out", trials=_ERRORED), ()

    monkeypatch.setattr(probes.deep_read, "read_job", read_job)
    return names


def _probe(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str
           ) -> tuple[int, str, str]:
    config = tmp_path / "jobtables.toml"
    config.write_text(CONFIG)
    code = main(["probe", "4242", "--config", str(config), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("name", "bucket"), [("sft-llama-8b", "sft"),
                                              ("eval-qwen-tb", "eval")])
def test_text_says_not_an_rl_run(reads: list[str], capsys: pytest.CaptureFixture[str],
                                 tmp_path: Path, name: str, bucket: str) -> None:
    reads.append(name)
    code, out, err = _probe(capsys, tmp_path)
    assert code == 0 and err == ""
    assert out.startswith("NOT AN RL RUN — no deep probe of alpha:4242")
    assert f"is not an RL run (bucket {bucket})" in " ".join(out.split())
    assert "the deep probe judges an RL run's rollouts and does not apply here" in \
        " ".join(out.split())
    assert "KILL" not in out  # no verdict: neither a KILL from RL rules nor a NO-KILL
    assert "row: buffering" in out  # what the row says instead


@pytest.mark.parametrize("name", ["sft-llama-8b", "eval-qwen-tb"])
def test_json_is_the_contract_job_without_a_verdict(
        reads: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    reads.append(name)
    code, out, err = _probe(capsys, tmp_path, "--format", "json")
    assert code == 0 and err == ""
    job = json.loads(out)
    assert set(job) == JOB_KEYS  # no `deep_probe`: none ran
    assert job["job_id"] == "4242" and job["name"] == name and job["bucket"] != "rl"


def test_an_rl_run_is_still_probed(reads: list[str], capsys: pytest.CaptureFixture[str],
                                   tmp_path: Path) -> None:
    """Control: the same facts under an RL name get their verdict, in text and JSON."""
    reads.append("rl-grpo-qwen7b")
    code, out, _ = _probe(capsys, tmp_path, "--format", "json")
    assert code == 0
    job = json.loads(out)
    assert job["deep_probe"]["verdict"] == "KILL"
    assert any("zero trials completing" in r for r in job["deep_probe"]["reasons"])
    code, out, _ = _probe(capsys, tmp_path)
    assert code == 0 and out.startswith("KILL — deep probe of alpha:4242 rl-grpo-qwen7b")
