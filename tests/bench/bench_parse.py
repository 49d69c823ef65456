"""Benchmark: parse_log throughput on a 200 MB log in real trainer formats (not a pytest test).

Run from the repo root:  PYTHONPATH=. .venv/bin/python tests/bench/bench_parse.py [--mb 200]

It writes a log mixing SkyRL step dicts (Ray prefixes, ANSI colour), SkyRL reward lines,
verl ``step:N`` lines, HF/TRL string dicts between ``\\r`` tqdm redraws, dataset bars and
plain noise into /tmp, then measures (1) the bounded-tail path the sweep uses (read_tail +
parse_log on the last 1/4/16 MB) and (2) the whole file streamed through parse_log in 8 MB
chunks, i.e. the line classifier's MB/s. ``grep -c Step`` on the same file is printed as the
floor to compare against. First, the CPU per MiB of a 1 MiB tail of each costly line shape
(``FRAGMENT_TAILS``: bar fragments, dict openers, nested dicts, ``Step x``, ...) against the
ordinary log's (``--fragments``: that alone, e.g. with ``--mb 2``).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

from probes.logs.parse import parse_log
from probes.remote.collector import read_tail

__test__ = False

ESC = "\x1b"


def skyrl_block(step: int, rng: random.Random) -> str:
    """One SkyRL step: reward line, coloured loguru header, pprint dict, all Ray-prefixed."""
    ray = "(skyrl_entrypoint pid=48213) "
    keys = {
        "generate/avg_num_tokens": rng.uniform(500, 900),
        "policy/grad_norm": rng.uniform(0.1, 0.5),
        "policy/loss_metrics/clip_ratio": rng.uniform(0, 0.01),
        "policy/policy_entropy": rng.uniform(0.4, 0.6),
        "policy/policy_loss": rng.uniform(-0.02, 0.02),
        "reward/avg_pass_at_8": rng.uniform(0, 1),
        "reward/avg_raw_reward": rng.uniform(0, 1),
        "timing/generate": rng.uniform(80, 100),
        "timing/step": rng.uniform(140, 160),
    }
    lines = [
        f"{ray}2026-02-12 14:31:07.412 | INFO     | skyrl.train.trainer:postprocess:1116 - "
        f"reward/avg_pass_at_8: {keys['reward/avg_pass_at_8']}, "
        f"reward/avg_raw_reward: {keys['reward/avg_raw_reward']}",
        f"{ray}{ESC}[32m2026-02-12 14:31:08.001{ESC}[0m | INFO     | "
        f"skyrl.train.utils.tracking:log:189 - Step {step}: ",
    ]
    items = [f"'{k}': '{v:.4f}'" for k, v in keys.items()] + [f"'trainer/global_step': {step}"]
    lines.append(f"{ray}{{{items[0]},")
    lines += [f"{ray} {item}," for item in items[1:-1]]
    lines.append(f"{ray} {items[-1]}}}")
    lines.append(
        f"{ray}Training Batches Processed:  12%|█▏        | {step}/100000 "
        f"[31:02<3:47:35, 155.18s/it]"
    )
    return "\n".join(lines) + "\n"


def skyrl_wandb_block(step: int, rng: random.Random) -> str:
    """One SkyRL step under ``trainer.logger=wandb`` (its default): reward line, the coloured
    loguru ``logger.info(status)`` dict (full floats, unprefixed keys), bar; no tracker dict."""
    ray = "(skyrl_entrypoint pid=48213) "
    status = {
        "final_loss": rng.uniform(-0.03, 0.0), "grad_norm": rng.uniform(0.1, 0.5),
        "policy_entropy": rng.uniform(0.4, 0.6), "policy_loss": rng.uniform(-0.02, 0.02),
        "policy_lr": 1e-06, "response_length": rng.uniform(500, 900),
    }
    lines = [
        f"{ray}2026-02-12 14:31:07.412 | INFO     | skyrl.train.trainer:postprocess:1116 - "
        f"reward/avg_pass_at_8: {rng.uniform(0, 1)}, reward/avg_raw_reward: {rng.uniform(0, 1)}",
        f"{ray}{ESC}[32m2026-02-12 14:31:08.001{ESC}[0m | {ESC}[1mINFO    {ESC}[0m | "
        f"{ESC}[36mskyrl.train.trainer{ESC}[0m:{ESC}[36mtrain{ESC}[0m:{ESC}[36m284{ESC}[0m - "
        f"{ESC}[1m{status!r}{ESC}[0m",
        f"{ray}Training Batches Processed:  12%|█▏        | {step}/100000 "
        f"[31:02<3:47:35, 155.18s/it]",
    ]
    return "\n".join(lines) + "\n"


def verl_line(step: int, rng: random.Random) -> str:
    """One verl console line in the >= 0.5 repr style with np.float64 values."""
    parts = [
        f"actor/entropy:np.float64({rng.random()})",
        f"actor/pg_loss:np.float64({rng.uniform(-0.01, 0.01)})",
        f"actor/pg_clipfrac:{rng.random() / 100}",
        f"actor/grad_norm:{rng.random()}",
        f"critic/score/mean:np.float64({rng.random()})",
        f"response_length/mean:{rng.uniform(300, 900)}",
        f"timing_s/step:{rng.uniform(100, 130)}",
        f"perf/throughput:{rng.uniform(1000, 2000)}",
    ]
    return f"(TaskRunner pid=247607) step:{step} - " + " - ".join(parts) + "\n"


def hf_block(step: int, rng: random.Random) -> str:
    """HF 5.x: a bar redraw, tqdm.write's clear, a string-valued dict."""
    return (
        f"\r  1%|          | {step}/100000 [00:{step % 60:02d}<00:11,  8.10it/s]"
        f"\r                                              \r"
        f"{{'loss': '{rng.uniform(1, 5):.4g}', 'grad_norm': '{rng.random():.4g}', "
        f"'learning_rate': '{rng.random() / 1000:.4g}', 'epoch': '{step / 1000:.4g}'}}\n"
    )


NOISE = [
    "(raylet) [2026-02-12 14:31:07,445 I 395 395] node_manager.cc:1049: heartbeat ok\n",
    "INFO 12-29 13:12:50 [shm_broadcast.py:542] No available shared memory broadcast block "
    "found in 60 seconds.\n",
    "\rMap (num_proc=16):  50%|█████     | 26001/52002 [00:06<00:06, 4213.33 examples/s]\n",
    "/usr/lib/python3/site-packages/transformers/training_args.py:1541: FutureWarning: x\n",
]


def build(path: Path, megabytes: int) -> None:
    """Write ``megabytes`` MB of mixed real-format lines to ``path``."""
    rng = random.Random(7)
    target = megabytes * 1024 * 1024
    written, step = 0, 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            step += 1
            chunk = (
                skyrl_block(step, rng)
                + verl_line(step, rng)
                + hf_block(step, rng)
                + "".join(rng.choice(NOISE) for _ in range(6))
            )
            out.write(chunk)
            written += len(chunk.encode())


def time_tails(path: Path) -> None:
    """The sweep's path: one bounded read and one parse per budget."""
    for mb in (1, 4, 16):
        start = time.perf_counter()
        tail = read_tail(str(path), mb * 1024 * 1024, 0)
        summary = parse_log(tail["text"], first_line_no=1)
        took = time.perf_counter() - start
        print(
            f"tail {mb:>2} MB: {took * 1000:8.1f} ms  {mb / took:6.1f} MB/s  "
            f"points={len(summary.points)} formats={summary.formats}"
        )


FRAGMENT_TAILS = {
    "x%| lines": "x%|\n",
    "%| lines": "%|\n",
    "fragments+bars": "x%|\n%|%|\n 45%|####      | 9/20 [00:01<00:02]\n50%| 3/4\n",
    "{x": "{x\n",
    "{": "{\n",
    "'a': 1,": "'a': 1,\n",
    "'a': 1}": "'a': 1}\n",
    "Step x": "Step x\n",
    "Step 5: x": "Step 5: x\n",
    "step: x": "step: x\n",
    "===== Step x": "===== Step x =====\n",
    "iteration x": "iteration x\n",
    "Global step x": "Global step x\n",
    "bullet": "  \u2022 Loss: x\n",
    "nested dict": "{'loss': {'a': [1, {'b': 2}]}, 'grad_norm': [[[[1]]]]}\n",
    "deep dict": "{'a': " * 300 + "1" + "}" * 300 + "\n",
    "json": '{"a": 1, "b": [1, 2, 3], "c": "x"}\n',
    "Traceback": "Traceback (most recent call last):\n",
    "(pid=1) x": "(TaskRunner pid=1) x\n",
    "nan dict": "{'loss': nan, 'grad_norm': inf, 'learning_rate': 1e999, 'epoch': -inf}\n",
    "verl nan": "step:1 - actor/entropy:nan - actor/grad_norm:inf - critic/score/mean:1e999\n",
    "key=value": " ".join(f"k{i}=v{i}" for i in range(40)) + "\n",
    "ANSI": "\x1b[31m\x1b[0m" * 50 + "\n",
    "tqdm \\r": " 45%|####      | 9/20 [00:01<00:02,  1.20it/s]\r",
    "NUL": "\x00" * 100 + "\n",
    "1 MiB line": "a" * (1024 * 1024),
}
"""Tails of line shapes that cost a parser most, as jobs print them (or an unlucky log holds):
lines that only look like tqdm bars (``%|``, no bar, no step), dict openers and fragments,
``Step``/``step:`` lines that are no step line, nested dicts (a config dump's shape) printed
over and over, tracebacks, floods of ANSI, NUL, ``\\r`` redraws, one line of a MiB."""


def time_fragment_tails(path: Path) -> None:
    """CPU per MiB of parse_log on a 1 MiB tail of each shape against the same on an
    ordinary log's 1 MiB tail (the ``x%|`` tail cost 2.5 s/MiB, some 20x the ordinary; a
    MiB of ``{`` lines 0.9 s, 8x)."""
    ordinary = read_tail(str(path), 1024 * 1024, 0)["text"]
    tails = {"ordinary log": ordinary} | {
        name: line * (1024 * 1024 // len(line)) for name, line in FRAGMENT_TAILS.items()}
    base = None
    for name, text in tails.items():
        start = time.process_time()
        parse_log(text, log_start=False, head="")
        per_mib = (time.process_time() - start) / (len(text.encode()) / 1024 / 1024)
        base = per_mib if base is None else base
        print(f"1 MiB tail of {name:>14}: {per_mib * 1000:8.1f} ms CPU/MiB "
              f"({per_mib / base:5.2f}x the ordinary log's)")


def time_stream(path: Path, chunk_mb: int = 8) -> float:
    """The whole file through parse_log in ``chunk_mb`` pieces; returns MB/s."""
    size = path.stat().st_size
    start, points = time.perf_counter(), 0
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        while True:
            text = handle.read(chunk_mb * 1024 * 1024)
            if not text:
                break
            points += len(parse_log(text).points)
    took = time.perf_counter() - start
    rate = size / 1024 / 1024 / took
    print(f"stream {size / 1024 / 1024:.0f} MB: {took:6.1f} s  {rate:6.1f} MB/s  points={points}")
    return rate


def time_grep(path: Path) -> None:
    """`grep -c Step` on the same file: the floor any Python classifier is measured against."""
    start = time.perf_counter()
    found = subprocess.run(
        ["grep", "-c", "Step", str(path)], capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - start
    size = path.stat().st_size / 1024 / 1024
    print(f"grep -c Step: {took:6.2f} s  {size / took:7.1f} MB/s  count={found.stdout.strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--path", type=Path, default=Path("/tmp/jobtables_bench_parse.log"))
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--fragments", action="store_true",
                        help="only the bar-fragment tails against the ordinary log's")
    args = parser.parse_args()
    if not args.path.exists() or args.path.stat().st_size < args.mb * 1024 * 1024:
        print(f"building {args.mb} MB log at {args.path} ...")
        build(args.path, args.mb)
    try:
        time_fragment_tails(args.path)
        if args.fragments:
            return 0
        time_tails(args.path)
        time_stream(args.path)
        time_grep(args.path)
    finally:
        if not args.keep:
            args.path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
