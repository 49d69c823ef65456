"""A long flat run of 'key: value' lines (tqdm redraws) is scanned for a YAML dump once."""

from __future__ import annotations

import pytest

from probes.logs import fingerprint
from probes.logs.parse import parse_log


def test_bar_redraws_are_not_rescanned_from_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """3000 '\\r' redraws of 'Generating: 5%|...' each match the YAML line shape: every one
    started a scan of the whole run (quadratic: a 1 MiB tail of redraws parsed for 5 min)."""
    calls: list[int] = []
    real = fingerprint._yaml_dump

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fingerprint, "_yaml_dump", counted)
    text = "".join(f"\rGenerating: {n * 100 // 5000:3d}%|###   | {n}/5000 [00:{n % 60:02d}<01:00]"
                   for n in range(1, 3001))
    parse_log(text)
    assert len(calls) <= 2


def test_a_nested_dump_after_a_flat_run_is_still_read() -> None:
    """The YAML dump after chatter in the same shape is still found (its keys fingerprinted)."""
    flat = "".join(f"note{n}: value {n}\n" for n in range(30))
    dump = ("trainer:\n  total_training_steps: 80\n  project_name: gsm8k\n"
            "actor_rollout_ref:\n  model:\n    path: Qwen/Qwen2.5-7B\n  rollout:\n    n: 8\n")
    summary = parse_log(flat + dump)
    assert summary.fingerprint is not None
    assert "Qwen/Qwen2.5-7B" in str(summary.fingerprint)


def test_the_incremental_walk_reads_a_flat_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's fold (``parse_increment``) walks the same lines: one scan, not one per line."""
    from probes.logs.incremental import parse_increment

    calls: list[int] = []
    real = fingerprint._yaml_dump

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fingerprint, "_yaml_dump", counted)
    text = "".join(f"\rGenerating: {n * 100 // 5000:3d}%|###   | {n}/5000 [00:{n % 60:02d}<01:00]"
                   for n in range(1, 3001)) + "\ndone writing shards\n"
    parse_increment(None, text, aliases={}, benign_patterns=(), mtime=None)
    assert len(calls) <= 4
