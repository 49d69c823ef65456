"""What the deep probe read: sampled rollouts, trials and the run's own series, as frozen facts.

Policy: the login-node reader (``probes.remote.rollouts``) sends plain dicts; this module turns
them, and what the log itself printed, into models the pure judgement (``report.deep_probe``)
reads. It never raises on a malformed answer: a field of the wrong type is dropped, so a
tampered or truncated answer reads as "less was read", never as evidence. Sources:

* TRL ``log_completions``: ``print_prompt_completions_sample`` prints a rich table in a
  ``Step N`` panel (trl 1.16 ``trainer/utils.py``). Cells wrap over several lines; each cell's
  pieces are joined with one space. The reward columns (every column but Prompt, Completion,
  Advantage) are summed as the sample's score.
* verl prints ``Dumped generations to <dir>/<step>.jsonl`` for each rollout/validation dump
  (``ray_trainer.py::_dump_generations``), SkyRL ``Dumped eval data for <source> to
  <export_path>/dumped_evals/global_step_N_evals/<source>.jsonl``
  (``trainer_utils.py::dump_per_dataset_eval_results``): the directory is probed even when
  the config names none.
* The run's timing and generation-length series come from the existing log parser, with the
  trainers' timing names aliased to the names the judgement reads (``TIMING_ALIASES``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from probes.logs.lines import strip_ansi
from probes.logs.parse import parse_log
from probes.models import Frozen, MetricPoint

TIMING_ALIASES: dict[str, str] = {
    "timing_s/gen": "gen_s", "timing/generate": "gen_s",
    "timing_s/step": "step_s", "timing/step": "step_s", "step_time": "step_s",
    "perf/throughput": "tokens_per_s", "trainer/tokens_per_second_per_gpu": "tokens_per_s",
    "response_length/clip_ratio": "clipped_ratio", "completions/clipped_ratio": "clipped_ratio",
    "response_length/mean": "avg_num_tokens", "completions/mean_length": "avg_num_tokens",
    "generate/avg_num_tokens": "avg_num_tokens",
}
"""Raw trainer names (verl, SkyRL, TRL) -> the series names the deep probe judges."""

_DUMPED = re.compile(
    r"Dumped generations to (\S{1,1024})/\d{1,12}\.jsonl"
    r"|Dumped eval data for .{1,256}? to (\S{1,1024})/dumped_evals/"
    r"(?:global_step_\d{1,12}_evals|eval_only)/[^/\s]{1,256}\.jsonl")
"""verl's dump line (group 1: the dump dir) and SkyRL's (group 2: its ``export_path``)."""
_PANEL = re.compile(r"╭─+ Step (\d{1,12}) ─+╮")
DumpKind = Literal["verl", "skyrl-evals", "empty", "trl-log"]
DumpRole = Literal["rollout", "validation"]


class RolloutSample(Frozen):
    """One generated sample: its prompt, the output text (cut), its score."""

    prompt: str | None = None
    output: str
    output_chars: int | None = None
    """Length of the full output before it was cut for the wire."""
    score: float | None = None
    stop_reason: str | None = None


class RolloutStep(Frozen):
    """The samples of one training step, from one file or one printed table."""

    step: int
    source: str
    samples: tuple[RolloutSample, ...] = ()


class RolloutDump(Frozen):
    """One dump directory (or the log's printed completions) and the steps read from it."""

    path: str
    kind: DumpKind
    role: DumpRole = "rollout"
    steps_listed: tuple[int, ...] = ()
    steps: tuple[RolloutStep, ...] = ()
    batch_steps: tuple[int, ...] = ()
    """SkyRL ``dumped_data`` pickles present (listed only, never opened)."""


class TrialSample(Frozen):
    """One sampled Harbor trial."""

    name: str
    reward: float | None = None
    exception_type: str | None = None
    n_output_tokens: float | None = None
    n_input_tokens: float | None = None
    n_turns: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    agent_started_at: str | None = None
    agent_finished_at: str | None = None
    messages: tuple[str, ...] = ()


class TrialSampleSet(Frozen):
    roots: tuple[str, ...] = ()
    listed: int = 0
    sampled: tuple[TrialSample, ...] = ()
    """The sampled trials that ended (a result.json)."""
    unfinished: int = 0
    """The sampled trials with no result.json yet (running, or never to end)."""
    unfinished_age_s: float | None = None
    """How long ago the oldest of those started, by the login node's clock."""


class RolloutFacts(Frozen):
    """Everything one deep probe read, with what it cost."""

    log_path: str | None = None
    trials: TrialSampleSet = TrialSampleSet()
    dumps: tuple[RolloutDump, ...] = ()
    series: tuple[MetricPoint, ...] = ()
    """The run's logged steps, with ``gen_s``/``step_s``/``tokens_per_s``/... aliases."""
    formats: tuple[str, ...] = ()
    """The log formats the series was read from (``LogSummary.formats``): the printed
    precision of a trainer's metrics (``report.rollouts.grad_zero_unresolved``)."""
    files_opened: int = 0
    bytes_read: int = 0
    skipped: tuple[str, ...] = ()
    elapsed_s: float | None = None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _sample(row: Any) -> RolloutSample | None:
    if not isinstance(row, Mapping) or not isinstance(row.get("output"), str):
        return None
    chars = _num(row.get("output_chars"))
    return RolloutSample(prompt=_str(row.get("input")), output=row["output"],
                         output_chars=int(chars) if chars is not None else None,
                         score=_num(row.get("score")), stop_reason=_str(row.get("stop_reason")))


def _steps(raw: Any) -> tuple[RolloutStep, ...]:
    steps = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("step"), int):
            continue
        samples = tuple(s for s in map(_sample, item.get("samples") or []) if s is not None)
        steps.append(RolloutStep(step=item["step"], source=str(item.get("file") or ""),
                                 samples=samples))
    return tuple(steps)


def _ints(raw: Any) -> tuple[int, ...]:
    return tuple(sorted(i for i in (raw if isinstance(raw, list) else []) if isinstance(i, int)))


def _dump(raw: Any, roles: Mapping[str, DumpRole]) -> RolloutDump | None:
    if not isinstance(raw, Mapping) or raw.get("kind") not in ("verl", "skyrl-evals", "empty"):
        return None
    path = str(raw.get("path") or "")
    return RolloutDump(path=path, kind=raw["kind"], role=roles.get(path, "rollout"),
                       steps_listed=_ints(raw.get("steps_listed")), steps=_steps(raw.get("steps")),
                       batch_steps=_ints(raw.get("batch_steps")))


def _trial(name: str, raw: Any) -> TrialSample | None:
    if not isinstance(raw, Mapping):
        return None
    fields = {k: _str(raw.get(k)) for k in ("exception_type", "started_at", "finished_at",
                                             "agent_started_at", "agent_finished_at")}
    numbers = {k: _num(raw.get(k)) for k in ("reward", "n_output_tokens", "n_input_tokens",
                                              "n_turns")}
    messages = tuple(m for m in (raw.get("messages") or []) if isinstance(m, str))
    return TrialSample(name=name, messages=messages, **fields, **numbers)


def trials_from_answer(raw: Any, read_at: Any = None) -> TrialSampleSet:
    if not isinstance(raw, Mapping):
        return TrialSampleSet()
    got = raw.get("sampled")
    sampled: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    trials = tuple(t for name, value in sorted(sampled.items())
                   if (t := _trial(str(name), value)) is not None)
    listed, unfinished = raw.get("listed"), raw.get("unfinished")
    oldest, now = _num(raw.get("oldest_unfinished")), _num(read_at)
    age = now - oldest if now is not None and oldest is not None else None
    return TrialSampleSet(roots=tuple(str(r) for r in raw.get("roots") or []),
                          listed=listed if isinstance(listed, int) else len(trials),
                          sampled=trials,
                          unfinished=unfinished if isinstance(unfinished, int) else 0,
                          unfinished_age_s=age)


def dump_dirs_in_log(text: str) -> list[str]:
    """Directories verl said it dumped generations to, and SkyRL its eval data (its export
    dir, which holds ``dumped_evals`` and ``dumped_data``), latest mention last, unique."""
    seen: dict[str, None] = {}
    for match in _DUMPED.finditer(text):
        path = match.group(1) or match.group(2)
        seen.pop(path, None)
        seen[path] = None
    return list(seen)


def _cells(line: str) -> list[str] | None:
    """The cells of one table body line ``│ │ a │ b │ │`` (panel border included)."""
    inner = line.strip()
    if not (inner.startswith("│") and inner.endswith("│")):
        return None
    inner = inner[1:-1].strip()
    if not (inner.startswith(("│", "┃")) and inner.endswith(("│", "┃"))):
        return None
    return [c.strip() for c in re.split(r"[│┃]", inner[1:-1])]


def _row_sample(header: Sequence[str], pieces: list[list[str]]) -> RolloutSample | None:
    joined = [" ".join(p for p in column if p) for column in pieces]
    cells = dict(zip(header, joined, strict=False))
    if "Completion" not in cells:
        return None
    scores = []
    for name, value in cells.items():
        if name in ("Prompt", "Completion", "Advantage"):
            continue
        try:
            scores.append(float(value))
        except ValueError:
            continue
    return RolloutSample(prompt=cells.get("Prompt"), output=cells["Completion"],
                         score=sum(scores) if scores else None)


def printed_completions(text: str) -> tuple[RolloutStep, ...]:
    """TRL's ``log_completions`` tables in a log tail, one step each (a reprint replaces)."""
    steps: dict[int, RolloutStep] = {}
    step: int | None = None
    header: list[str] = []
    rows: list[RolloutSample] = []
    pieces: list[list[str]] = []

    def flush_row() -> None:
        if pieces and header:
            sample = _row_sample(header, pieces)
            if sample is not None:
                rows.append(sample)
        pieces.clear()

    for raw in re.split(r"\r\n?|\n", text):
        line = strip_ansi(raw)
        if (panel := _PANEL.search(line)) is not None:
            step, header, rows = int(panel.group(1)), [], []
            pieces.clear()
            continue
        if step is None:
            continue
        if "┃" in line and not header:
            header = [c for c in (_cells(line) or []) if c]
        elif "├" in line:
            flush_row()
        elif "└" in line or "╰" in line:
            flush_row()
            steps[step] = RolloutStep(step=step, source="log", samples=tuple(rows))
            step = None
        elif (cells := _cells(line)) is not None and header and "━" not in line:
            if not pieces:
                pieces.extend([] for _ in cells)
            for column, cell in zip(pieces, cells, strict=False):
                column.append(cell)
    return tuple(steps[k] for k in sorted(steps))


def rollout_facts(
    answer: Mapping[str, Any] | None,
    *,
    log_text: str = "",
    log_path: str | None = None,
    roles: Mapping[str, DumpRole] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> RolloutFacts:
    """The reader's answer plus what the log printed, as one :class:`RolloutFacts`."""
    answer = answer if isinstance(answer, Mapping) else {}
    dumps = [d for d in (_dump(r, roles or {}) for r in answer.get("dumps") or []) if d]
    printed = printed_completions(log_text) if log_text else ()
    if printed:
        dumps.append(RolloutDump(path=log_path or "log", kind="trl-log",
                                 steps_listed=tuple(s.step for s in printed), steps=printed))
    summary = parse_log(log_text, aliases={**(aliases or {}), **TIMING_ALIASES})
    skipped = answer.get("skipped")
    elapsed = _num(answer.get("elapsed_s"))
    return RolloutFacts(
        log_path=log_path, trials=trials_from_answer(answer.get("trials"), answer.get("read_at")),
        dumps=tuple(dumps),
        series=summary.points, formats=tuple(summary.formats),
        files_opened=int(_num(answer.get("files_opened")) or 0),
        bytes_read=int(_num(answer.get("bytes_read")) or 0),
        skipped=tuple(str(s) for s in (skipped if isinstance(skipped, list) else [])),
        elapsed_s=elapsed,
    )


def unique(paths: Iterable[str]) -> list[str]:
    """Paths in first-seen order without repeats."""
    return list(dict.fromkeys(p for p in paths if p))
