"""Which desc-less tqdm bar is the training bar when no banner names the total.

Found on an SFT dry-run: a TRL SFTTrainer run (transformers' default WARNING verbosity, so no
``***** Running training *****`` banner) whose script tokenized its 52,002 examples in a plain
``for ex in tqdm(raw):`` loop (a desc-less bar, like the trainer's) read progress 52000/52002,
``total_steps`` 52002 and 0.00025 s/step at training step 12/916: the bar chosen was the one
redrawn most, the tokenizer's. The seed: "Grep the TRAINING progress bar, not the packing bar.
Verify the denominator matches the cell's total optimization steps, not an example count."
Lines are tqdm 4.x's non-TTY redraws and HF's ProgressCallback dicts (``tqdm.write``).
"""

from __future__ import annotations

from probes.logs.parse import parse_log

CLEAR = "\r" + " " * 50 + "\r"


def _tokenizer_loop(upto: int = 52002, every: int = 520) -> str:
    """``for ex in tqdm(raw)`` over 52,002 examples: 101 redraws at ~4,200 it/s."""
    steps = [*range(0, upto, every), upto]
    return "".join(f"\r{100 * k // 52002:3d}%|█         | {k}/52002 "
                   f"[00:{k // 4500:02d}<00:10, 4213.33it/s]" for k in steps) + "\n"


def _training(upto: int, total: int = 916, log_every: int = 10) -> str:
    out = ""
    for k in range(upto + 1):
        clock = f"{2 * k // 60:02d}:{2 * k % 60:02d}"
        out += f"\r{100 * k // total:3d}%|          | {k}/{total} [{clock}<30:00,  2.00s/it]"
        if k and k % log_every == 0:
            out += (CLEAR + f"{{'loss': {2.0 - k / 1000}, 'grad_norm': 0.8, "
                    f"'learning_rate': 2e-05, 'epoch': {round(2 * k / total, 2)}}}\n")
    return out


def test_the_bar_the_step_dicts_follow_is_the_training_bar() -> None:
    """Tokenizer loop done, training at 12/916 with one dict logged: 12/916, not 52000/52002."""
    summary = parse_log("Tokenizing\n" + _tokenizer_loop() + _training(12))
    assert summary.progress is not None
    assert (summary.progress.current, summary.total_steps) == (12, 916)
    assert summary.sec_per_step is not None and summary.sec_per_step > 1.0


def test_a_finished_bar_another_bar_follows_is_over() -> None:
    """Before the first dict (step 5/916), the finished tokenizer bar is no longer the
    activity: the bar drawn after it is."""
    summary = parse_log("Tokenizing\n" + _tokenizer_loop() + _training(5))
    assert summary.progress is not None
    assert (summary.progress.current, summary.total_steps) == (5, 916)


def test_a_later_bar_without_dicts_does_not_displace_the_training_bar() -> None:
    """After training (30/30 with its dicts), a desc-less evaluation/generation loop of more
    redraws than training had is not the training bar."""
    generate = "".join(f"\r{k * 100 // 200:3d}%|          | {k}/200 [00:{k // 10:02d}<00:10, "
                       f"10.00it/s]" for k in range(201)) + "\n"
    summary = parse_log(_training(30, total=30) + "\n" + generate)
    assert summary.progress is not None
    assert (summary.progress.current, summary.total_steps) == (30, 30)
