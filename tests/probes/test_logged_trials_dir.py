"""An agentic RL run's trial tree where its launcher put it: the trials dir the log names.

Found by an acceptance dry-run: a SkyRL run with Harbor trials whose ``trials_dir`` was not
under a default trial root (a flat ``{workdir}/jobs/<run>/<trial>/result.json``, or an
absolute path printed in the config dump) was never found, so a COMPLETED agentic run with its
trials still on disk got no ``cleanup-pending`` (rulebook: "cleanup is not done until the
artifact's on-disk trial tree is removed").

The formats are SkyRL's own (examples/train_integrations/harbor): ``main_harbor`` merges
``harbor_trial_config`` (``trials_dir: ~/trials`` in ``harbor_trial_config/default.yaml``,
overridden by ``++harbor_trial_config.trials_dir=$TRIALS_DIR``), ``BasePPOExp._setup_trainer``
logs ``get_config_as_yaml_str(cfg)`` (``yaml.dump(asdict(cfg))``: sorted keys, 2-space
indent) through loguru, and ``HarborGenerator.__init__`` logs ``HarborGenerator initialized
with Harbor config. Agent: terminus-2, Trials dir: <trials_dir>``; Harbor writes each trial to
``<trials_dir>/<task>__<id>/``. The trials are real Harbor 0.26.0 trial dirs.

A logged trials dir inside the job's workdir or a configured root is entered component by
component without following a link; one outside them is a root of its own, opened as the guard
opens a root (the job user's own files only).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.models import JobState
from probes.remote import collector
from probes.remote.script import build_collector_script
from probes.slurm.assemble import job_facts
from tests.report.factories import judge, record

FIX = Path(__file__).resolve().parents[1] / "fixtures"
JOB = FIX / "harbor-0.26.0" / "jobs" / "2026-11-30__14-00-00"
SKYRL = (FIX / "skyrl-rebuilt" / "console_v04.log").read_text()
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"
LOGURU = ("\x1b[36m(skyrl_entrypoint pid=48213)\x1b[0m \x1b[32m2026-02-12 14:29:01.201\x1b[0m"
          " | \x1b[1mINFO    \x1b[0m | \x1b[36m{module}\x1b[0m:\x1b[36m{func}\x1b[0m:"
          "\x1b[36m{line}\x1b[0m - \x1b[1m{msg}\x1b[0m")


def _config_dump(trials_dir: str) -> str:
    """SkyRL's start-up config dump (``yaml.dump(asdict(cfg))`` logged by loguru)."""
    cfg = {
        "data": {"train_data": ["/home/u/data/harbor/CodeContests"], "val_data": []},
        "generator": {"backend": "vllm", "n_samples_per_prompt": 8,
                      "served_model_name": "Qwen3-8B"},
        "harbor_trial_config": {
            "agent": {"kwargs": {"max_turns": 32, "store_all_messages": True},
                      "name": "terminus-2", "override_timeout_sec": 1200},
            "environment": {"type": "daytona"},
            "timeout_multiplier": 1.0,
            "trials_dir": trials_dir,
            "verifier": {"disable": False},
        },
        "trainer": {"ckpt_path": "/home/u/otagent/ckpts", "epochs": 3,
                    "export_path": "/home/u/otagent/exports", "project_name": "harbor",
                    "run_name": "codecontest", "strategy": "fsdp2"},
    }
    dumped = yaml.dump(cfg)
    first, rest = dumped.split("\n", 1)
    head = LOGURU.format(module="skyrl.train.entrypoints.main_base", func="_setup_trainer",
                         line=128, msg=first)
    init = LOGURU.format(
        module="examples.train_integrations.harbor.harbor_generator", func="__init__", line=78,
        msg=f"HarborGenerator initialized with Harbor config. Agent: terminus-2, Trials dir:"
            f" {trials_dir}")
    return f"{head}\n{rest}{init}\n"


def _trials(root: Path, n: int = 4) -> None:
    """``n`` real Harbor trial dirs written flat below ``root`` (SkyRL's HarborGenerator)."""
    root.mkdir(parents=True)
    real = sorted(p.parent for p in JOB.glob("*/result.json"))
    for i in range(n):
        src = real[i % len(real)]
        dest = root / f"{src.name.split('__')[0]}__{i:07d}"
        shutil.copytree(src, dest)
        config = json.loads((src / "result.json").read_text()).get("config") or {}
        (dest / "config.json").write_text(json.dumps(config))
        (dest / "agent").mkdir(exist_ok=True)


def _request(workdir: Path, log_text: str, **job: Any) -> dict[str, Any]:
    out = workdir / "rl-skyrl-cc_7001.out"
    out.write_text(log_text)
    spec = {"id": "7001", "stdout": str(out), "workdir": str(workdir), "offset": 0,
            "completed": True, "checkpoint_roots": [str(workdir / "checkpoints")],
            "trial_roots": [str(workdir / "jobs")]}  # the default {workdir}/jobs
    spec.update(job)
    return {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]}


def _judged(answer: dict[str, Any], workdir: Path) -> Any:
    rec = record("rl-skyrl-codecontest", job_id="7001", state=JobState.COMPLETED,
                 workdir=str(workdir), stdout_path=str(workdir / "rl-skyrl-cc_7001.out"))
    facts = job_facts(rec, answer["jobs"]["7001"], aliases={}, benign_patterns=())
    return facts, judge(facts)


def _counted(answer: dict[str, Any]) -> dict[str, int]:
    trials = answer["jobs"]["7001"]["trials"]
    return {root: sum(j["tally"]["trials"] for j in v.get("jobs", {}).values())
            for root, v in trials.items() if v.get("exists")}


@pytest.mark.parametrize("where", ["jobs/codecontest", "trials_run", "out/harbor/trials"])
def test_a_completed_agentic_run_with_its_logged_trials_dir_is_cleanup_pending(
        tmp_path: Path, where: str) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    (workdir / "jobs").mkdir(exist_ok=True)  # the default root exists, holding no job dir
    trials_dir = workdir / where
    _trials(trials_dir)
    answer = collector.collect(_request(workdir, _config_dump(str(trials_dir)) + SKYRL))
    assert _counted(answer).get(str(trials_dir)) == 4
    facts, detail = _judged(answer, workdir)
    assert facts.trials is not None and facts.trials.root == str(trials_dir)
    row = detail.report
    assert "cleanup-pending" in row.flags
    assert row.recommendation is not None and row.recommendation.action == "cleanup"
    assert row.recommendation.why.startswith("rl-agentic-job-cleanup")
    assert str(trials_dir) in row.recommendation.why


@pytest.mark.parametrize("line", [
    # Hydra's override, echoed by the launch script's `set -x`
    "+ uv run --isolated --extra fsdp --extra harbor -m examples.train_integrations.harbor."
    "entrypoints.main_harbor ++harbor_trial_config.trials_dir={d} trainer.epochs=3",
    # the older terminal_bench_config form
    "+ python -m examples.terminal_bench.entrypoints.main_tbench"
    " +terminal_bench_config.trials_dir={d}",
    # a relative trials_dir resolves against the job's workdir (Harbor's default is "trials")
    "HarborGenerator initialized with Harbor config. Agent: terminus-2, Trials dir: {rel}",
])
def test_each_printed_form_names_the_trials_dir(tmp_path: Path, line: str) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    trials_dir = workdir / "trials"
    _trials(trials_dir, 2)
    text = line.format(d=trials_dir, rel="trials") + "\n" + SKYRL
    answer = collector.collect(_request(workdir, text))
    assert _counted(answer) == {str(trials_dir): 2}


def test_a_trials_dir_outside_the_workdir_and_roots_is_its_own_root(tmp_path: Path) -> None:
    """Outside the workdir and roots (scratch; SkyRL's default ~/trials), a logged trials dir
    is a root of its own, read through the guard: the job user's own trials are counted
    (another user's are not: tests/probes/slurm/test_e2e_trials_outside_workdir.py); /proc
    is refused and /etc holds no trial."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    elsewhere = tmp_path / "scratch" / "trials"
    _trials(elsewhere, 2)
    dotted = f"{workdir}/../scratch/trials"
    for named in (str(elsewhere), dotted):
        answer = collector.collect(_request(workdir, _config_dump(named) + SKYRL))
        assert _counted(answer) == {str(elsewhere): 2}, named
    for named in ("/etc", "/proc/self"):
        answer = collector.collect(_request(workdir, _config_dump(named) + SKYRL))
        assert not any(_counted(answer).values()), named


def test_a_link_inside_the_workdir_is_not_followed_out_of_it(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    elsewhere = tmp_path / "someone-else"
    _trials(elsewhere / "trials", 2)
    os.symlink(elsewhere, workdir / "out")
    answer = collector.collect(
        _request(workdir, _config_dump(str(workdir / "out" / "trials")) + SKYRL))
    assert _counted(answer) == {}


def test_the_shipped_script_reads_the_logged_trials_dir_under_python37(tmp_path: Path) -> None:
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    workdir = tmp_path / "w"
    workdir.mkdir()
    trials_dir = workdir / "jobs" / "codecontest"
    _trials(trials_dir, 3)
    req = _request(workdir, _config_dump(str(trials_dir)) + SKYRL)
    ran = subprocess.run([str(PY37), "-"], input=build_collector_script(req).encode(),
                         capture_output=True, check=True, timeout=120)
    answer = json.loads(ran.stdout)
    assert _counted(answer).get(str(trials_dir)) == 3


def test_a_running_runs_logged_trials_dir_is_kept_across_warm_reads(tmp_path: Path) -> None:
    """The bot reads a running job's log from its cursor: the appended lines only, which no
    longer hold the config dump. The trials dir found there rides in the cursor, as logged
    checkpoint dirs do, so the run's trials stay counted (the pass-rate signal reads them):
    they were searched on no read that had a cursor, the bot's first included."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    trials_dir = workdir / "jobs" / "codecontest"
    _trials(trials_dir, 3)
    first = collector.collect(_request(workdir, _config_dump(str(trials_dir)) + SKYRL,
                                       completed=False, cursor=None))
    assert _counted(first).get(str(trials_dir)) == 3
    cursor = first["jobs"]["7001"]["log"]["cursor"]
    assert cursor["trials"] == [str(trials_dir)]
    with (workdir / "rl-skyrl-cc_7001.out").open("a") as fh:
        fh.write("step 41 | reward 0.5 | policy_loss 0.01\n")  # the trainer goes on
    spec = dict(_request(workdir, "", completed=False)["jobs"][0], cursor=cursor)
    (workdir / "rl-skyrl-cc_7001.out").write_text(
        _config_dump(str(trials_dir)) + SKYRL + "step 41 | reward 0.5 | policy_loss 0.01\n")
    second = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]})
    log = second["jobs"]["7001"]["log"]
    assert log.get("continued") is True, log
    assert _counted(second).get(str(trials_dir)) == 3
    assert log["cursor"]["trials"] == [str(trials_dir)]
