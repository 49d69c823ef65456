"""An eval array whose tasks each run another benchmark keeps a row per benchmark (found by an
acceptance dry run: ``sbatch --array=0-2`` as jtuser on the real SLURM, task k running Harbor on
terminal-bench-core, swebench-verified or aider-polyglot, each into its own ``trial_roots``
dir ``.../{user}/{name}/{job_id}``, read through ``jobtables sweep``).

The Eval table's rows are model × benchmark (rulebook). The array was one group row carrying its
worst member: ``eval-qwen3-32b-suite (Qwen3-32B × terminal-bench-core) [3 running] 20/40 0.90``;
the swebench-verified (0.10) and aider-polyglot (0.50) evals were nowhere in the table. Tasks
that are shards of one eval (the same model × benchmark) stay one row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from report.grouping import group_report, groups_json
from report.models import JobDetail
from report.render import render_text
from tests.report.factories import judge, log, record, report_of
from tests.report.test_harbor_dryrun_datagen import MAKE

_LOG = ("2026-12-05 03:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _task(root: Path, task: int, dataset: str, mix: dict[str, int]) -> JobFacts:
    """Array task ``950_<task>``: one Harbor job of ``dataset`` in its own root."""
    now = datetime.now(UTC)
    job_dir = root / f"950_{task}" / f"{dataset}-qwen3-32b"
    MAKE.write(job_dir, mix, total=40, seed=task)
    result = job_dir / "result.json"  # make_tree names one dataset: give each task its own
    result.write_text(result.read_text().replace("tbench-hard", dataset))
    tree = trial_tree(collect_trials([str(root / f"950_{task}")]))
    assert tree is not None
    rec = record("eval-qwen3-32b-suite", job_id=f"950_{task}",
                 start_time=now - timedelta(minutes=30), elapsed_s=1800,
                 array_job_id="950", array_task_id=str(task))
    return JobFacts(record=rec, log=log(mtime=now), summary=parse_log(_LOG, mtime=now),
                    trials=tree)


def _grouped(facts: list[JobFacts]) -> tuple[list[JobDetail], str, list[dict[str, object]]]:
    now = datetime.now(UTC)
    details = [judge(f, others=[g.record for g in facts if g is not f], now=now)
               for f in facts]
    report = report_of(*(d.report for d in details))
    by_key = {(d.report.cluster, d.report.job_id): d for d in details}
    grouped, shown = group_report(report, by_key)
    return (list(shown.values()), render_text(grouped, shown, width=100),
            groups_json(report, details=by_key))


def test_each_benchmark_of_an_eval_array_keeps_its_row(tmp_path: Path) -> None:
    facts = [_task(tmp_path, 0, "terminal-bench-core", {"pass": 18, "fail": 2}),
             _task(tmp_path, 1, "swebench-verified", {"pass": 2, "fail": 10, "timeout": 8}),
             _task(tmp_path, 2, "aider-polyglot", {"pass": 6, "fail": 6, "inflight": 4})]
    shown, text, groups = _grouped(facts)
    rows = sorted((d.display_name, d.report.metrics["pass_rate"]) for d in shown)
    assert rows == [
        ("eval-qwen3-32b-suite (Qwen3-32B × aider-polyglot)", 0.5),
        ("eval-qwen3-32b-suite (Qwen3-32B × swebench-verified)", 0.1),
        ("eval-qwen3-32b-suite (Qwen3-32B × terminal-bench-core)", 0.9),
    ], rows
    for benchmark in ("terminal-bench-core", "swebench-verified", "aider-polyglot"):
        assert benchmark in text, text
    assert groups == []


def test_shards_of_one_eval_stay_one_row(tmp_path: Path) -> None:
    facts = [_task(tmp_path, k, "swebench-verified", {"pass": 4 + k, "fail": 8})
             for k in range(3)]
    shown, text, groups = _grouped(facts)
    assert [d.display_name for d in shown] == [
        "eval-qwen3-32b-suite (Qwen3-32B × swebench-verified) [3 running]"], text
    assert [g["members"] for g in groups] == [["950_0", "950_1", "950_2"]]


def test_benchmarks_mixed_in_one_shared_jobs_dir_say_so(tmp_path: Path) -> None:
    """The array's tasks wrote into one ``jobs/`` (Harbor's default ``jobs_dir``), so no task's
    own benchmark can be told from the tree: each read all three. The one row showed
    ``eval-qwen3-32b-suite [3 running] 52/120 0.50``, a pass-rate over three benchmarks
    under no benchmark's name; it now says it mixes them, and how to keep them apart."""
    root = tmp_path / "jobs"
    specs = [("terminal-bench-core", {"pass": 18, "fail": 2}),
             ("swebench-verified", {"pass": 2, "fail": 10, "timeout": 8}),
             ("aider-polyglot", {"pass": 6, "fail": 6, "inflight": 4})]
    for k, (dataset, mix) in enumerate(specs):
        job_dir = root / f"2026-12-05__03-00-0{k}"
        MAKE.write(job_dir, mix, total=40, seed=k)
        result = job_dir / "result.json"
        result.write_text(result.read_text().replace("tbench-hard", dataset))
    tree = trial_tree(collect_trials([str(root)]))
    assert tree is not None
    now = datetime.now(UTC)
    facts = [JobFacts(record=record("eval-qwen3-32b-suite", job_id=f"951_{k}",
                                    start_time=now - timedelta(minutes=30), elapsed_s=1800,
                                    array_job_id="951", array_task_id=str(k)),
                      log=log(mtime=now), summary=parse_log(_LOG, mtime=now), trials=tree)
             for k in range(3)]
    shown, text, _ = _grouped(facts)
    (row,) = shown
    assert row.display_name == "eval-qwen3-32b-suite (Qwen3-32B × 3 benchmarks) [3 running]"
    assert "3 benchmarks in one trial tree: pass-rate mixed" in row.report.trend, row.report.trend
    assert "pass-rate mixed" in text, text
