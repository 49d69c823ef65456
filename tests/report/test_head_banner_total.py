"""verl's and SkyRL's ``Total training steps: N`` read from a long log's head.

Both trainers print it once at start (verl ``ray_trainer.py``, SkyRL ``main_base.py``); their
training bar (``Training Progress``, ``Training Batches Processed``) is tqdm on a Ray actor's
stderr, whose carriage-return redraws Ray forwards only when a newline follows (or to a
separate ``sbatch -e`` file). A tail cut from a longer log, with no bar in it, took HF's
banner from the log's head (the collector's ``head``) but not theirs: a verl run read step 60
of no total (the rulebook: "Total steps come from the rendered config or the trainer banner").
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import judge, log, record

VERL = "(TaskRunner pid=1187) "
SKYRL = "(skyrl_entrypoint pid=48213) "


def _verl(steps: int, bar: bool) -> str:
    lines = [VERL + "Size of train dataloader: 467, Size of val dataloader: 1",
             VERL + "Total training steps: 300"]
    for step in range(1, steps + 1):
        lines.append(VERL + f"step:{step} - actor/entropy:0.6 - actor/pg_loss:-0.01 - "
                     "actor/grad_norm:0.2 - critic/score/mean:0.3 - response_length/mean:480.0")
        if bar:
            lines.append(VERL + f"Training Progress:  {step // 3}%|          | {step}/300 "
                         f"[00:{step:02d}<10:00, 103.70s/it]")
    return "\n".join(lines) + "\n"


def _skyrl(steps: int, bar: bool) -> str:
    lines = [SKYRL + "INFO | skyrl.train.entrypoints.main_base:run:301 - "
                     "Total training steps: 120"]
    for step in range(1, steps + 1):
        lines.append(SKYRL + "INFO | skyrl.train.utils.tracking:log:189 - Step "
                     f"{step}: ")
        lines.append(SKYRL + "{'policy/grad_norm': '0.2100', 'policy/policy_entropy': '0.5800',"
                     f" 'reward/avg_raw_reward': '0.3000', 'trainer/global_step': {step}}}")
        if bar:
            lines.append(SKYRL + f"Training Batches Processed:  {step * 100 // 120}%|      "
                         f"    | {step}/120 [00:{step:02d}<10:00, 161.20s/it]")
    return "\n".join(lines) + "\n"


def _cut_read(text: str, at: str) -> tuple[int | None, int | None]:
    """The step and total of the tail of ``text`` from the line holding ``at``, its head the
    lines before (as the collector sends a long log's)."""
    cut = text.rfind("\n", 0, text.index(at)) + 1
    summary = parse_log(text[cut:], log_start=False, head=text[:cut])
    report = judge(JobFacts(record=record("rl-run", job_id="100"), log=log(path="/w/100.out"),
                            summary=summary.model_copy(update={"last_timestamp": None}))).report
    return report.step, report.total_steps


@pytest.mark.parametrize("bar", [False, True])
def test_verl_total_from_the_head(bar: bool) -> None:
    """Without a bar in the tail the head's banner is the total; with one (near miss) the
    same."""
    assert _cut_read(_verl(60, bar), "step:30 ") == (60, 300)


@pytest.mark.parametrize("bar", [False, True])
def test_skyrl_total_from_the_head(bar: bool) -> None:
    assert _cut_read(_skyrl(40, bar), "Step 20: ") == (40, 120)
