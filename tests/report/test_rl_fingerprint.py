"""The deep-probe fingerprint is what the run runs: memory (kept by the bot in Redis), earlier
attempts in the same sweep, chain predecessors, config changes, and the name-stem fallback.

verl logs are the REAL config dumps (verl 0.9.1's generated config, OmegaConf, pprint) followed by
verl's real console formatter (tests/fixtures/generators/README.md).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, LogSummary
from report.judge import build_report
from report.judge_rl import run_fingerprint
from report.memory import SweepMemory, next_memory
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, log, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _from_log(text: str | bytes, name: str = "rl-run", job_id: str = "100",
              state: JobState = JobState.RUNNING, **rec: Any) -> JobFacts:
    """A job whose summary is the real parser's reading of ``text`` (fresh log, read fine)."""
    summary = parse_log(text).model_copy(update={"last_timestamp": None})
    return JobFacts(record=record(name, job_id=job_id, state=state, **rec),
                    log=log(path=f"/w/{job_id}.out"), summary=summary)


def _verl(name: str, job_id: str, fixture: str = "config_a", **rec: Any) -> JobFacts:
    return _from_log((FIXTURES / f"verl-0.9.1/{fixture}.log").read_bytes(), name=name,
                     job_id=job_id, **rec)


def _sweep(*jobs: JobFacts, memory: SweepMemory | None = None) -> dict[str, Any]:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW,
                             memory=memory)
    return {j.job_id: j for j in report.jobs}


def _earlier(job: JobFacts, hours: int) -> JobFacts:
    at = NOW - timedelta(hours=hours)
    return job.model_copy(update={"record": job.record.model_copy(
        update={"submit_time": at, "state": JobState.TIMEOUT, "end_time": at})})


@pytest.mark.parametrize(
    ("earlier", "now", "probed", "why"),
    [
        # a relaunch under the same name with a new model (real verl config dumps)
        (("grpo-qwen", "90", "config_a"), ("grpo-qwen", "100", "config_b"), True,
         "relaunch of 90 with new model Qwen/Qwen2.5-7B-Instruct→Qwen/Qwen3-8B"),
        # a resume (-r2, new experiment name and checkpoint dir): the same setting
        (("grpo-qwen", "90", "config_a"), ("grpo-qwen-r2", "100", "config_a_resume"), False, ""),
        # a chain predecessor under another name, found by depends_on
        (("grpo-qwen-7b", "90", "config_a"), ("rl-qwen-next", "100", "config_b"), True,
         "relaunch of 90 with new model"),
    ],
)
def test_relaunch_against_earlier_attempts_without_memory(
    earlier: tuple[str, str, str], now: tuple[str, str, str], probed: bool, why: str
) -> None:
    """Without memory, the earlier attempts in the sweep say whether the setting is new."""
    before = _earlier(_verl(*earlier), hours=3)
    current = _verl(*now, depends_on=(earlier[1],))
    job = _sweep(before, current)[now[1]]
    assert ("deep-probe" in job.flags) is probed
    if probed:
        assert job.recommendation is not None and job.recommendation.action == "deep_probe"
        assert why in job.recommendation.why


def test_config_change_alone_is_a_relaunch_in_a_new_setting() -> None:
    """Same model and geometry, one optimiser value changed in the dump: new config."""
    text = (FIXTURES / "verl-0.9.1/config_a.log").read_text()
    assert "'lr': 1e-06" in text
    changed = _from_log(text.replace("'lr': 1e-06", "'lr': 3e-06", 1), name="grpo-qwen")
    job = _sweep(_earlier(_verl("grpo-qwen", "90"), hours=3), changed)["100"]
    assert job.recommendation is not None and "with new config" in job.recommendation.why


@pytest.mark.parametrize(
    ("seen", "name", "fixture", "probed"),
    [
        ("config_a", "grpo-qwen", "config_b", True),  # known name, new model
        ("config_a", "another-name", "config_a_resume", False),  # known setting, new name
        ("config_a", "grpo-qwen", "config_a", False),
    ],
)
def test_memory_compares_what_the_run_runs(
    seen: str, name: str, fixture: str, probed: bool
) -> None:
    """Sweep memory (the bot keeps it in Redis) holds fingerprints, not names."""
    memory = SweepMemory(seen_configs={"alpha": [run_fingerprint(_verl("grpo-qwen", "1", seen))]})
    job = _sweep(_verl(name, "100", fixture), memory=memory)["100"]
    assert ("deep-probe" in job.flags) is probed


def test_a_long_run_past_its_banner_is_still_known() -> None:
    """Once the tail no longer shows the dump, the remembered run's name stem decides."""
    memory = SweepMemory(seen_configs={"alpha": [run_fingerprint(_verl("grpo-qwen", "1"))]})
    tail_only = _from_log((FIXTURES / "verl-0.9.1/console.log").read_bytes(), name="grpo-qwen")
    assert "deep-probe" not in _sweep(tail_only, memory=memory)["100"].flags
    other = _from_log((FIXTURES / "verl-0.9.1/console.log").read_bytes(), name="rl-other-run")
    assert "deep-probe" in _sweep(other, memory=memory)["100"].flags


def test_next_memory_remembers_the_fingerprint() -> None:
    """A healthy run's memory entry is its content fingerprint plus its name stem."""
    job = _verl("grpo-qwen-r3", "100")
    report, details = build_report([cluster("alpha", [job])], settings=ReportSettings(), now=NOW,
                                   memory=SweepMemory(seen_configs={"alpha": []}))
    memory = next_memory(report, details, [cluster("alpha", [job])], None)
    (entry,) = memory.seen_configs["alpha"]
    assert entry.endswith("|grpo-qwen") and "model=Qwen/Qwen2.5-7B-Instruct" in entry
    assert "geometry=2x8,tp2" in entry


def test_fingerprint_without_a_dump_falls_back_to_labels_and_name() -> None:
    """No printed config: labels naming an image/config, else the name stem."""
    assert run_fingerprint(record("rl-run-r2")) == "rl-run"
    labelled = record("rl-run", labels={"image": "verl:0.9.1", "team": "x"})
    assert run_fingerprint(labelled) == "image=verl:0.9.1|rl-run"
    assert LogSummary(line_count=0).fingerprint is None


def test_a_parallel_arm_is_not_a_relaunch() -> None:
    """Two arms running side by side with different models: neither relaunches the other."""
    first = _verl("grpo-qwen-1", "90")
    first = first.model_copy(update={"record": first.record.model_copy(
        update={"submit_time": NOW - timedelta(hours=3)})})
    second = _verl("grpo-qwen-2", "100", "config_b")
    jobs = _sweep(first, second)
    assert jobs["100"].recommendation is None or (
        "relaunch" not in jobs["100"].recommendation.why)


def test_memory_decides_over_a_relaunch_once_the_setting_was_seen_healthy() -> None:
    """A relaunch with a new model stops being news once that setting was seen healthy."""
    before = _earlier(_verl("grpo-qwen", "90"), hours=3)
    current = _verl("grpo-qwen", "100", "config_b")
    memory = SweepMemory(seen_configs={"alpha": [run_fingerprint(current)]})
    assert "deep-probe" not in _sweep(before, current, memory=memory)["100"].flags
    job = _sweep(before, current, memory=SweepMemory(seen_configs={"alpha": []}))["100"]
    assert job.recommendation is not None and "relaunch of 90" in job.recommendation.why


def test_relaunch_with_a_new_image() -> None:
    """Same verl config, a new container image (pyxis's import line): a new setting."""
    dump = (FIXTURES / "verl-0.9.1/config_a.log").read_text()
    old = _from_log("pyxis: importing docker image: registry/verl:0.9.0\n" + dump, "grpo-qwen",
                    "90")
    new = _from_log("pyxis: importing docker image: registry/verl:0.9.1\n" + dump, "grpo-qwen")
    job = _sweep(_earlier(old, hours=3), new)["100"]
    assert job.recommendation is not None
    assert "relaunch of 90 with new image registry/verl:0.9.0→registry/verl:0.9.1" in (
        job.recommendation.why)
    assert job.trend.startswith("Relaunched in a new setting: deep-probe it")


def test_a_new_rollout_engine_is_a_new_config() -> None:
    """``rollout.name`` (vllm → sglang) is part of the setting; the experiment name is not."""
    text = (FIXTURES / "verl-0.9.1/config_a.log").read_text()
    assert "'name': '???'" in text  # verl's generated config leaves the engine to the launch
    vllm = _from_log(text.replace("'name': '???'", "'name': 'vllm'", 1), "grpo-qwen", "90")
    sglang = _from_log(text.replace("'name': '???'", "'name': 'sglang'", 1), name="grpo-qwen")
    job = _sweep(_earlier(vllm, hours=3), sglang)["100"]
    assert job.recommendation is not None and "with new config" in job.recommendation.why
