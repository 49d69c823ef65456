"""A desc-less bar that cannot be the trainer's is no training progress, cold or folded.

Two readings of an HF Trainer run with no ``***** Running training *****`` banner (transformers'
default WARNING verbosity) and no step dict yet to tell which bar the trainer's is:

- a script's own ``for ex in tqdm(raw)`` tokenizer loop is the only bar so far: ``jobtables job``
  read step 30000 and total_steps 52002, an example count (CONTRACT §3: total_steps is never
  one). Its iterations run thousands a second and advance hundreds a redraw: no optimizer step
  does. Now no progress (the run is in bring-up) until the training bar or a dict shows;
- a run shorter than ``logging_steps`` (HF's default 500: no step dict at all) whose script
  calls ``trainer.evaluate()`` after ``train()``: the evaluation bar (desc-less, at position 0
  once the training bar is closed) drawn after the trainer's ``train_runtime`` dict became
  the run's progress, 20/50 for a run trained to 100/100 (review of 42a65b9, which ranked the
  finished training bar below any bar drawn after it).
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import JobState, LogSummary
from tests.probes.logs.pieces import fold_in_pieces

CLEAR = "\r" + " " * 50 + "\r"


def _tokenizer(upto: int, every: int = 520, total: int = 52002) -> str:
    """``for ex in tqdm(raw)`` over 52,002 examples at ~4,200 it/s (tqdm 4.x non-TTY redraws)."""
    steps = sorted({*range(0, upto, every), upto})
    return "".join(
        f"\r{100 * k // total:3d}%|█         | {k}/{total} [00:{k // 4213:02d}<00:05, "
        f"{'?it/s' if k == 0 else '4213.33it/s'}]" for k in steps)


def _training(upto: int, total: int, *, start: int = 0, dicts: bool = True,
              rate: str = " 2.00s/it") -> str:
    """HF's training bar, one redraw a step, and its dict every 10 steps when ``dicts``."""
    out = ""
    for k in range(start, upto + 1):
        clock = f"{2 * k // 60:02d}:{2 * k % 60:02d}"
        out += f"\r{100 * k // total:3d}%|          | {k}/{total} [{clock}<30:00, {rate}]"
        if dicts and k and k % 10 == 0:
            out += (CLEAR + f"{{'loss': {2.0 - k / 1000}, 'grad_norm': 0.8, "
                    f"'learning_rate': 2e-05, 'epoch': {round(k / total, 2)}}}\n")
    return out


def _evaluation(upto: int, total: int = 50) -> str:
    return "".join(f"\r{k * 100 // total:3d}%|          | {k}/{total} [00:{k // 10:02d}<00:05,"
                   f" 10.00it/s]" for k in range(upto + 1))


END = CLEAR + "{'train_runtime': 200.1, 'train_samples_per_second': 4.0, 'train_loss': 1.9}\n"
GLUED_END = END[len(CLEAR):]
"""HF's PrinterCallback ``print``: the end dict on the bar's last redraw's line."""


def _folded(text: str, pieces: int = 7) -> LogSummary:
    return fold_in_pieces(text, pieces)


def _progress(summary: LogSummary) -> tuple[int | None, int | None, int | None]:
    bar = summary.progress
    return (bar.current if bar else None, bar.total if bar else None, summary.total_steps)


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("Tokenizing\n" + _tokenizer(30000), (None, None, None), id="tokenizer-mid-way"),
    pytest.param("\r 57%|█████     | 30000/52002 [00:06<00:05, 4213.33it/s]" * 4,
                 (None, None, None), id="one-redraw-repeated"),
    pytest.param(_tokenizer(52002) + "\nLoading checkpoint shards\n", (None, None, None),
                 id="tokenizer-done-model-loading"),
    pytest.param(_tokenizer(52002) + "\n" + _training(3, 916, dicts=False), (3, 916, 916),
                 id="then-the-training-bar"),
    pytest.param(_training(100, 100, dicts=False) + "\n" + END + _evaluation(20),
                 (100, 100, 100), id="evaluate-after-train-running"),
    pytest.param(_training(100, 100, dicts=False) + "\n" + END + _evaluation(50) + "\n",
                 (100, 100, 100), id="evaluate-after-train-done"),
    # a long log's cold parse reads only its last steps in full: the end glued to a bar
    # line it skims is placed among the redraws, as the fold places it
    pytest.param(_training(100, 100, dicts=False) + GLUED_END + _evaluation(30) + "\n"
                 + "".join(f"{{'step': {k}, 'loss': 1.0}}\n" for k in range(1, 80)),
                 (100, 100, 100), id="end-glued-in-the-skimmed-part"),
    # kept: a resumed bar's one jump to its global step is no fast loop
    pytest.param(_training(0, 916, dicts=False) + "\r 98%|          | 901/916 [00:01<00:15, "
                 "450.2it/s]" + _training(904, 916, start=902, dicts=False, rate="120.5it/s"),
                 (904, 916, 916), id="resumed-bar-jump-kept"),
    # kept: a fast bar the step dicts follow is the trainer's (a tiny model)
    pytest.param(_training(40, 400, rate="312.50it/s"), (40, 400, 400), id="fast-with-dicts"),
    # kept: a fast bar the banner's total names
    pytest.param("***** Running training *****\n  Total optimization steps = 400\n"
                 + _training(15, 400, dicts=False, rate="312.50it/s"), (15, 400, 400),
                 id="fast-banner-total"),
])
def test_a_bar_that_cannot_be_the_trainers_is_no_progress(
        text: str, expected: tuple[int | None, int | None, int | None]) -> None:
    """Cold parse and the bot's fold read the same progress, never an example count."""
    assert _progress(parse_log(text)) == expected
    assert _progress(_folded(text)) == expected


def test_the_job_reads_bring_up_not_an_example_count() -> None:
    """Through the judge: the repro's row has no step and no total, and fills its buffer."""
    from probes.models import JobFacts
    from tests.report.factories import judge, log, record

    text = "\r 57%|█████     | 30000/52002 [00:06<00:05, 4213.33it/s]" * 4
    job = JobFacts(record=record("sft-trl-qwen-default-verbosity", "90", JobState.RUNNING),
                   log=log(text=text), summary=parse_log(text))
    report = judge(job).report
    assert (report.step, report.total_steps) == (None, None)
    assert "sec_per_step" not in report.metrics
    assert report.verdict == "buffering"
