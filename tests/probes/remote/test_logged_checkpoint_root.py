"""A save folder the launcher names outside the job's workdir and configured roots banks its steps.

The rulebook: take the max ``global_step_N`` under the run's checkpoint prefix, and "search every
location the launcher may have written to". A checkpoint directory the log (or the job's
command line) names was searched only inside the workdir or a ``checkpoint_roots`` entry
(``probes.remote.logged_paths``), and a config dump at the log's head was not read for it at
all. Replayed under real sbatch jobs (ckptlog, jobs 28-32): verl's ``default_local_dir`` on a
scratch filesystem (its dump and ``local_global_step_folder:`` lines naming it), SkyRL's
``trainer.ckpt_path`` named only in its YAML dump, OpenRLHF's ``--ckpt_path`` given on the
sbatch command line (SLURM's ``Command=``), and a verl run that resumed from an earlier
attempt's folder into a new one: ``banked_step`` null for every one of them.

Such a directory is now a root of its own, opened as the guard opens a root (a directory the
job's user could list, nothing under /proc, /sys or /dev), only the named directory listed
(with its ``exports/`` and trainer-role directories, as any searched directory), and only the
job user's own steps count there. The path is the cluster's text: one that climbs out with
``..``, sits under ``~`` or a variable, or names the model to load is not used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState
from probes.remote import collector
from probes.slurm.assemble import job_facts
from tests.probes.remote.test_checkpoint_root_symlink import _jtuser
from tests.report.factories import record

FIX = Path(__file__).resolve().parents[2] / "fixtures"
VERL_DUMP = (FIX / "verl-0.9.1" / "config_a.log").read_text()
VERL_CONSOLE = (FIX / "verl-0.9.1" / "console.log").read_text()
SKYRL_DUMP = (FIX / "skyrl-rebuilt" / "config_yaml.log").read_text()
SKYRL_CONSOLE = "\n".join(
    (FIX / "skyrl-rebuilt" / "console_v04.log").read_text().splitlines()[:1548]) + "\n"
OPENRLHF = (FIX / "openrlhf-rebuilt" / "ppo_global_steps.log").read_text()
PREFIX = "(TaskRunnerV1 pid=247607) "


def _verl_log(local_dir: str, *saves: int, resumed_from: str | None = None) -> str:
    """verl 0.9.1's config dump naming ``local_dir`` as ``trainer.default_local_dir``, its
    console, a resume's ``Load from checkpoint folder:`` line and its save lines."""
    dump = VERL_DUMP.replace("'default_local_dir': 'checkpoints/gsm8k/grpo-qwen7b-a'",
                             f"'default_local_dir': '{local_dir}'")
    assert dump != VERL_DUMP
    lines = [dump.rstrip("\n")]
    if resumed_from is not None:
        lines.append(f"{PREFIX}Load from checkpoint folder: {resumed_from}")
    lines.append(VERL_CONSOLE.rstrip("\n"))
    lines += [f"{PREFIX}local_global_step_folder: {local_dir}/global_step_{s}" for s in saves]
    return "\n".join(lines) + "\n"


def _skyrl_log(ckpt: str, export: str) -> str:
    """SkyRL's YAML config dump naming ``trainer.ckpt_path`` and ``trainer.export_path``, then
    its console to step 30, whose saves print no path ("Finished: 'save_checkpoints'")."""
    dump = SKYRL_DUMP.replace(
        "ckpt_path: /home/ray/ckpts",
        f"ckpt_path: {ckpt}\n(skyrl_entrypoint pid=48213)   export_path: {export}")
    assert dump != SKYRL_DUMP
    return dump + SKYRL_CONSOLE


def _steps(folder: Path, *steps: int, name: str = "global_step_{}", role: str = "actor") -> None:
    for step in steps:
        (folder / name.format(step) / role).mkdir(parents=True)


def _own(top: Path, uid: int) -> None:
    for path in [top, *top.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def _banked(tmp: Path, log: str, *, command: str | None = None, head: int | None = None,
            uid: int | None = None) -> tuple[int | None, dict[str, Any]]:
    """The banked step of a running jtuser job in ``tmp/w`` whose log is ``log`` (read with a
    ``tail_bytes`` of ``head`` when given: its config dump then comes as the log's head); the
    whole tree is given to ``uid`` (default: jtuser's; -1: left as laid out) first."""
    workdir = tmp / "w"
    workdir.mkdir(exist_ok=True)
    out = workdir / "slurm-7001.out"
    out.write_text(log)
    job: dict[str, Any] = {
        "id": "7001", "user": "jtuser", "stdout": str(out), "workdir": str(workdir),
        "offset": 0, "completed": False,
        "checkpoint_roots": [str(workdir / "checkpoints"), str(workdir / "ckpt")],
        "trial_roots": [str(workdir / "jobs")]}
    if command is not None:
        job["command"] = command
    if uid != -1:  # -1: the caller laid the owners out itself (the job's files are its own)
        _own(tmp, _jtuser() if uid is None else uid)
    _own(workdir, _jtuser())
    request = {"tail_bytes": head or 1 << 22, "min_lines": 1, "jobs": [job]}
    if head is not None:
        request["head_bytes"] = 1 << 20
    entry = collector.collect(request)["jobs"]["7001"]
    rec = record("rl-grpo-exp", job_id="7001", state=JobState.RUNNING, user="jtuser",
                 workdir=str(workdir), stdout_path=str(out))
    facts = job_facts(rec, entry, aliases={}, benign_patterns=())
    return (facts.checkpoints.banked_step if facts.checkpoints else None), entry


def test_verls_default_local_dir_on_scratch_banks(reachable_tmp: Path) -> None:
    """verl's ``default_local_dir`` outside the workdir and roots: its saves bank."""
    folder = reachable_tmp / "scratch" / "verl" / "gsm8k" / "exp"
    _steps(folder, 10, 20)
    (folder / "latest_checkpointed_iteration.txt").write_text("20")
    banked, _ = _banked(reachable_tmp, _verl_log(str(folder), 10, 20))
    assert banked == 20


def test_the_config_dump_at_the_heads_of_a_long_log_names_the_folder(
        reachable_tmp: Path) -> None:
    """SkyRL's ``trainer.ckpt_path``, named only in its YAML dump at the log's head (the tail
    read is 64 KiB): its steps bank, the tracker's 30; its ``export_path``'s HF exports, one
    step further, bank nothing (an export is no checkpoint)."""
    ckpt, export = reachable_tmp / "scratch" / "ckpts", reachable_tmp / "scratch" / "hf-out"
    _steps(ckpt, 10, 20, 30, role="policy")
    (ckpt / "latest_ckpt_global_step.txt").write_text("30")
    _steps(export, 30, 40, role="policy")
    log = _skyrl_log(str(ckpt), str(export))
    assert len(log.encode()) > 1 << 16
    banked, entry = _banked(reachable_tmp, log, head=1 << 16)
    assert "head" in entry["log"]
    assert banked == 30


def test_openrlhfs_ckpt_path_on_the_command_line_banks(reachable_tmp: Path) -> None:
    """OpenRLHF's ``--ckpt_path`` given to the batch script (SLURM's ``Command=``): DeepSpeed's
    ``_actor/global_stepN`` below it bank; the ``--pretrain`` path's do not."""
    ckpt = reachable_tmp / "scratch" / "orl" / "checkpoints_ppo_ray"
    _steps(ckpt / "_actor", 20, 40, name="global_step{}", role="zero")
    (ckpt / "_actor" / "latest").write_text("global_step40")
    init = reachable_tmp / "scratch" / "init"
    _steps(init / "_actor", 500, name="global_step{}", role="zero")
    command = (f"/home/jtuser/orl/train_ppo.sbatch --pretrain {init} --save_path "
               f"{reachable_tmp}/scratch/orl/final --ckpt_path {ckpt} --save_steps 20")
    assert _banked(reachable_tmp, OPENRLHF, command=command)[0] == 40
    assert _banked(reachable_tmp, OPENRLHF)[0] is None  # near miss: no command, no folder


@pytest.mark.parametrize(("saved", "banked"), [((), 20), ((30,), 30)])
def test_a_resumed_run_banks_from_the_earlier_attempts_folder_and_its_own(
        reachable_tmp: Path, saved: tuple[int, ...], banked: int) -> None:
    """A verl run resumed from its earlier attempt's ``run1`` into a new ``run2``: the max over
    both (``run1``'s 20 before ``run2`` holds a save, then ``run2``'s 30)."""
    run1, run2 = reachable_tmp / "scratch" / "run1", reachable_tmp / "scratch" / "run2"
    _steps(run1, 10, 20)
    run2.mkdir(parents=True)
    _steps(run2, *saved)
    log = _verl_log(str(run2), *saved, resumed_from=f"{run1}/global_step_20")
    assert _banked(reachable_tmp, log)[0] == banked


@pytest.mark.parametrize("named", [
    "../elsewhere/ckpts",  # relative, climbing out of the workdir
    "{top}/scratch/../elsewhere/ckpts",  # absolute with a '..'
])
def test_a_hostile_or_unresolvable_named_folder_is_not_used(reachable_tmp: Path,
                                                            named: str) -> None:
    """The steps are there, but the named path climbs out with ``..``: nothing banks; the
    command line's ``$(...)`` is text, never run. Near miss: named without the climb, they
    bank."""
    _steps(reachable_tmp / "elsewhere" / "ckpts", 10)
    (reachable_tmp / "w" / "a" / "b").mkdir(parents=True)
    path = named.format(top=reachable_tmp)
    log = _verl_log(path)
    pwned = reachable_tmp / "pwned"
    command = f"/w/job.sbatch --ckpt_path '{path}' --save_path $(touch {pwned})"
    banked, entry = _banked(reachable_tmp, log, command=command)
    assert banked is None, entry["checkpoints"]
    assert not pwned.exists()
    # the near miss: the same tree, named without the climb, banks
    assert _banked(reachable_tmp, _verl_log(str(reachable_tmp / "elsewhere" / "ckpts")))[0] == 10


def test_another_owners_steps_in_a_named_folder_outside_do_not_bank(reachable_tmp: Path) -> None:
    """Outside the workdir and roots only the job user's own steps count: a log naming a
    teammate's folder banks none of theirs (near miss: the user's own, above, do)."""
    folder = reachable_tmp / "scratch" / "teammate" / "exp"
    _steps(folder, 10, 20)
    _own(reachable_tmp, _jtuser())
    _own(folder, 65534)
    banked, entry = _banked(reachable_tmp, _verl_log(str(folder), 20), uid=-1)
    assert banked is None, entry["checkpoints"]
    assert _banked(reachable_tmp, _verl_log(str(folder), 20))[0] == 20  # the user's own


def test_a_folder_the_jobs_user_cannot_list_is_not_read(reachable_tmp: Path) -> None:
    """A named folder inside another owner's 0700 directory is not listed (Guard.open_root)."""
    private = reachable_tmp / "private"
    folder = private / "exp"
    _steps(folder, 10)
    _own(reachable_tmp, _jtuser())
    os.chown(private, 65534, 65534)
    os.chmod(private, 0o700)
    banked, entry = _banked(reachable_tmp, _verl_log(str(folder), 10), uid=-1)
    assert banked is None
    assert not entry["checkpoints"].get("listings")
    os.chmod(private, 0o755)  # the near miss: open, it banks
    assert _banked(reachable_tmp, _verl_log(str(folder), 10), uid=-1)[0] == 10


def test_named_folders_are_bounded() -> None:
    """At most 8 named folders are taken from one log, however many it prints."""
    from probes.remote.logged_paths import logged_checkpoint_dirs

    log = "".join(f"'default_local_dir': '/scratch/u/run{i}'\n" for i in range(50))
    found = logged_checkpoint_dirs(log, ["/home/u/w"], "/home/u/w")
    assert len(found) == 8
    assert all(re.fullmatch(r"/scratch/u/run\d+", base) and not below for base, below in found)


@pytest.mark.parametrize("via", ["dump", "command"])
def test_a_warm_read_keeps_the_named_folder(reachable_tmp: Path, via: str) -> None:
    """A running job's resumed read (the bot's warm sweep) has only the new lines, no config
    dump, and the sweep's listing sends no command line: the folder the first read found
    rides in the log cursor and still banks (SkyRL's ckpt_path, OpenRLHF's --ckpt_path)."""
    ckpt = reachable_tmp / "scratch" / "ckpts"
    _steps(ckpt, 10, 20, role="policy")
    log = _skyrl_log(str(ckpt), str(reachable_tmp / "scratch" / "hf"))
    if via == "command":
        log = SKYRL_CONSOLE
    workdir = reachable_tmp / "w"
    workdir.mkdir()
    out = workdir / "slurm-7001.out"
    out.write_text(log)
    _own(reachable_tmp, _jtuser())
    job: dict[str, Any] = {"id": "7001", "user": "jtuser", "stdout": str(out),
                           "workdir": str(workdir), "offset": 0, "completed": False,
                           "checkpoint_roots": [str(workdir / "checkpoints")],
                           "trial_roots": [], "cursor": None}
    if via == "command":
        job["command"] = f"/home/jtuser/w/job.sbatch --ckpt_path {ckpt}"
    first = collector.collect({"tail_bytes": 1 << 22, "min_lines": 1, "jobs": [job]})
    cursor = first["jobs"]["7001"]["log"]["cursor"]
    assert str(ckpt) in cursor["dirs"]
    with out.open("a") as handle:
        handle.write("(skyrl_entrypoint pid=48213) Training Batches Processed:  31%|\n")
    job.update(cursor=cursor)
    job.pop("command", None)
    warm = collector.collect({"tail_bytes": 1 << 22, "min_lines": 1, "jobs": [job]})
    entry = warm["jobs"]["7001"]
    assert entry["log"]["offset"] > 0  # a resumed read: only the new line
    assert entry["checkpoints"]["listings"].get(str(ckpt)) == ["global_step_10", "global_step_20"]


@pytest.mark.parametrize("via", ["command", "printed-args"])
def test_openrlhf_010s_ckpt_path_banks(reachable_tmp: Path, via: str) -> None:
    """OpenRLHF >= 0.10 takes ``--ckpt.path`` (its resumable saves; ``--ckpt.output_dir`` is
    the final model) and prints its args as nested namespaces (``ckpt=namespace(save_steps=10,
    path='...')``): either names the folder whose ``_actor/global_stepN`` bank."""
    ckpt = reachable_tmp / "scratch" / "orl010" / "ckpt"
    _steps(ckpt / "_actor", 10, 20, name="global_step{}", role="zero")
    printed = (FIX / "openrlhf-rebuilt" / "ppo_args_namespace.log").read_text()
    command = None
    if via == "command":
        command = (f"/home/jtuser/orl/ppo.sbatch --actor.model_name_or_path Qwen/Qwen2.5-7B "
                   f"--ckpt.output_dir {reachable_tmp}/scratch/orl010/final --ckpt.path {ckpt}"
                   " --ckpt.save_steps 10")
    else:
        printed = printed.replace("path='./ckpt/checkpoints_ppo_ray'", f"path='{ckpt}'")
        assert str(ckpt) in printed
    assert _banked(reachable_tmp, printed, command=command)[0] == 20


@pytest.mark.parametrize("trainer", ["skyrl", "hf"])
def test_a_run_resumed_from_a_path_banks_the_earlier_folder(reachable_tmp: Path,
                                                            trainer: str) -> None:
    """A run resumed from an earlier attempt's folder it names only by its resume key, its
    own new folder still empty: SkyRL's ``trainer.resume_mode=from_path`` with
    ``resume_path`` in its YAML dump, the HF Trainer's ``resume_from_checkpoint`` in its
    printed TrainingArguments: the earlier folder's steps bank."""
    earlier, fresh = reachable_tmp / "scratch" / "run1", reachable_tmp / "scratch" / "run2"
    fresh.mkdir(parents=True)
    if trainer == "skyrl":
        _steps(earlier, 10, 20, role="policy")
        log = _skyrl_log(str(fresh), str(reachable_tmp / "scratch" / "hf")).replace(
            "(skyrl_entrypoint pid=48213)   run_name:",
            "(skyrl_entrypoint pid=48213)   resume_mode: from_path\n"
            f"(skyrl_entrypoint pid=48213)   resume_path: {earlier}/global_step_20\n"
            "(skyrl_entrypoint pid=48213)   run_name:", 1)
        assert "resume_path" in log
        want = 20
    else:
        _steps(earlier, 250, 500, name="checkpoint-{}", role="")
        for step in (250, 500):
            (earlier / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
        log = ("TrainingArguments(\n_n_gpu=1,\nbf16=True,\n"
               f"output_dir={fresh},\noverwrite_output_dir=False,\n"
               f"resume_from_checkpoint={earlier}/checkpoint-500,\nsave_steps=250,\n)\n")
        want = 500
    assert _banked(reachable_tmp, log)[0] == want


MEGATRON = (FIX / "megatron-rebuilt" / "exit_duration.log").read_text()


@pytest.mark.parametrize("via", ["args-and-save-lines", "save-lines", "command"])
def test_megatrons_save_dir_outside_banks(reachable_tmp: Path, via: str) -> None:
    """Megatron-LM's ``--save`` on scratch: its printed arguments (``  save ....... /p``), its
    save lines (``saving checkpoint at iteration 20 to /p in torch_dist format``, no step
    directory in the path) or the command line name it; ``iter_0000040`` banks 40 (its
    ``load`` folder, the base model, banks nothing)."""
    save = reachable_tmp / "scratch" / "run-a" / "ckpt"
    _steps(save, 20, 40, name="iter_{:07d}", role="mp_rank_00")
    (save / "latest_checkpointed_iteration.txt").write_text("40")
    base = reachable_tmp / "scratch" / "llama3-8b-mcore"
    _steps(base, 1, name="iter_{:07d}", role="mp_rank_00")
    log = MEGATRON.replace("/scratch/alice/run-a/ckpt", str(save)).replace(
        "/scratch/alice/llama3-8b-mcore", str(base))
    command = None
    if via == "save-lines":
        log = "\n".join(x for x in log.splitlines() if " ....." not in x) + "\n"
    elif via == "command":
        log = "\n".join(x for x in log.splitlines() if "checkpoint" not in x
                        and " save ..." not in x) + "\n"
        command = (f"/home/jtuser/mega/pretrain.sbatch --load {base} --save {save} "
                   "--save-interval 20")
    assert str(save) in log or command
    assert _banked(reachable_tmp, log, command=command)[0] == 40
