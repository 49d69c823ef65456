"""A healthy run whose answers changed length is not KILLed on "the text changed character".

Found with ``jobtables probe`` on the real SLURM 22.05 (job 484): a verl GRPO run on GSM8K
dumping ``rollout_data_dir`` whose answers went from long chain-of-thought at step 1 (30 %
correct) to concise ``#### 72`` answers at steps 7-9 (80 % correct) read KILL, "compression
ratio 0.33 at step 9 (verl rollout dump) vs 0.03 at the baseline step 1 (10.5x): the text
changed character, e.g. "#### 72"", a correct answer quoted as evidence of a dead run. zlib's
ratio rises as texts shorten and falls as they lengthen, so a run that learns to answer tersely
(a length penalty, a format reward) or to reason longer (R1-style growth) moved it as much as
weight-sync garbage. Garbage cannot pass a verifier: a shift the verifier still passes at
least as often as at the baseline is a change of style, not a dead run. Near misses: garbage
scoring 0 and a shift whose pass rate fell still fire.
"""

from __future__ import annotations

from probes.rollouts import RolloutDump, RolloutFacts, RolloutSample, RolloutStep
from report.deep_probe import judge_rollouts

NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Albert", "Ken")
FORMATS = ("#### {a}", "{a}\n#### {a}", "Total: {a}. #### {a}", "The answer is {a}.\n#### {a}")


def _cot(i: int, k: int, a: int) -> str:
    """A varied chain-of-thought answer, as a base model writes before RL shortens it."""
    name = NAMES[i % len(NAMES)]
    return (f"First, {name} sold some clips in April (case {i}-{k}). Then she sold more in "
            f"May. To find the total, add the April amount and the May amount together. "
            f"Checking the arithmetic digit by digit, carrying where needed, we get {a}. "
            f"Therefore the number of clips {name} sold altogether is {a}.\n#### {a}")


def _step(step: int, text: str, passed: float) -> RolloutStep:
    """8 prompts x 4 samples; ``passed`` of each group's samples score 1."""
    samples = []
    for i in range(8):
        prompt = f"{NAMES[i]} sold {10 + i} clips in April and {20 + i} in May. How many?"
        for k in range(4):
            a = 30 + 2 * i
            out = _cot(i, k, a) if text == "cot" else (
                FORMATS[k].format(a=a) if text == "short" else
                "inton年年ĠĠapis-ms(CC_AdjustorThunk)RTLU.scalablytyped" * (3 + k))
            samples.append(RolloutSample(prompt=prompt, output=out,
                                         score=1.0 if k < round(4 * passed) else 0.0))
    return RolloutStep(step=step, source=f"{step}.jsonl", samples=tuple(samples))


def _run(late: str, late_pass: float, early: str = "cot", early_pass: float = 0.25) -> RolloutFacts:
    steps = (_step(1, early, early_pass), *(_step(n, late, late_pass) for n in (7, 8, 9)))
    dump = RolloutDump(path="/w/rollout", kind="verl", steps_listed=(1, 7, 8, 9), steps=steps)
    return RolloutFacts(dumps=(dump,))


def test_answers_that_got_terse_and_more_correct_are_no_kill() -> None:
    """Long CoT at 25 % to terse answers at 75 %: NO-KILL."""
    result = judge_rollouts(_run("short", 0.75))
    assert result.verdict == "NO-KILL", result.reasons


def test_answers_that_got_longer_and_as_correct_are_no_kill() -> None:
    """Terse at step 1 to long reasoning later, as often correct: NO-KILL."""
    result = judge_rollouts(_run("cot", 0.5, early="short", early_pass=0.5))
    assert result.verdict == "NO-KILL", result.reasons


def test_garbage_still_reads_as_changed_text() -> None:
    """Near miss: token salad scoring 0 still moves the ratio and is KILL with that reason."""
    result = judge_rollouts(_run("garbage", 0.0))
    assert result.verdict == "KILL"
    assert any(r.startswith("compression ratio ") for r in result.reasons), result.reasons


def test_a_shift_whose_pass_rate_fell_still_fires() -> None:
    """Near miss: terse answers the verifier passes less often than the baseline: fires."""
    result = judge_rollouts(_run("short", 0.25, early_pass=0.75))
    assert any(r.startswith("compression ratio ") for r in result.reasons), result.reasons
