"""verl's fully-async trainer's total from its start-up line (CONTRACT §3 ``total_steps``).

``verl/experimental/fully_async_policy/fully_async_main.py`` (volcengine/verl, 2026-01) prints
``total_train_steps {N}`` once the rollouter has sized the run (the parameter versions its
trainer logs, ``step:N`` on the console, and its ``Training Progress`` bar's total); it prints
no ``Total training steps: N`` as the colocated trainer does. Its bar is tqdm's, on the
trainer actor's stderr, which Ray forwards to the driver's stderr: under ``sbatch -e`` (or
when Ray's forwarding drops tqdm's carriage-return redraws) the log has no bar, and such a
run read ``step 40`` of no total. The rollouter's ``Total rollout steps`` counts samples, not
steps, and is no total.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import judge, log, record
from tests.report.test_judge_rl_rulebook import _from_log

TRAINER = "(FullyAsyncTrainer pid=2211) "


def _log(versions: int, *, banner: bool = True, bar: bool = False) -> str:
    lines = ["[ASYNC MAIN] Creating FullyAsyncRollouter...",
             "(FullyAsyncRollouter pid=2210) [FullyAsyncRollouter] Total rollout steps: 102400",
             "[ASYNC MAIN] Creating FullyAsyncTrainer..."]
    if banner:
        lines.append("(FullyAsyncTaskRunner pid=2209) total_train_steps 200")
    for version in range(1, versions + 1):
        lines.append(TRAINER + f"[FullyAsyncTrainer] global_steps: {4 * version} "
                     "local_trigger_step: 4 trigger_parameter_sync_step: 4 10:00:11.204")
        lines.append(TRAINER + f"step:{version} - actor/entropy:0.55 - actor/pg_loss:-0.01 - "
                     "actor/grad_norm:0.25 - critic/score/mean:0.3 - response_length/mean:612.0")
        if bar:
            lines.append(TRAINER + f"Training Progress:  {version // 2}%|          | "
                         f"{version}/200 [00:{version:02d}<10:00, 352.40s/it]")
        lines.append(TRAINER + f"step:{version} - timing_s/wait_last_valid:0.0004 - "
                     "timing_s/param_sync:6.91")
    return "\n".join(lines) + "\n"


def test_the_start_up_line_is_the_total_with_no_bar() -> None:
    report = judge(_from_log(_log(40), name="rl-verl-fully-async")).report
    assert (report.step, report.total_steps) == (40, 200)


def test_the_bar_and_the_line_agree() -> None:
    report = judge(_from_log(_log(40, bar=True), name="rl-verl-fully-async")).report
    assert (report.step, report.total_steps) == (40, 200)


def test_the_rollouters_sample_count_is_no_total() -> None:
    """Near miss: with no ``total_train_steps`` line, ``Total rollout steps`` gives none."""
    report = judge(_from_log(_log(40, banner=False), name="rl-verl-fully-async")).report
    assert (report.step, report.total_steps) == (40, None)


def test_a_long_runs_total_is_read_from_its_head() -> None:
    """A tail cut from a longer log, its bar-less steps after the line: the line is in the
    log's head (the collector's ``head``) only."""
    text = _log(40)
    cut = text.index(TRAINER + "[FullyAsyncTrainer] global_steps: 40")
    head, tail = text[:cut], text[cut:]
    summary = parse_log(tail, log_start=False, head=head)
    report = judge(JobFacts(record=record("rl-verl-fully-async", job_id="100"),
                            log=log(path="/w/100.out"),
                            summary=summary.model_copy(update={"last_timestamp": None}))).report
    assert report.total_steps == 200
