"""Progress read from a job's log when it has no Harbor trials to count: an offline engine's
generation bar, a served engine's client bar, lm-evaluation-harness request bars and scores.

Policy: a datagen job with no trial tree whose log shows generation moving is healthy, its
progress and ETA in the Trend (prompts and requests are no Harbor trials: no Trials count); an
lm-eval run is live while its request bars move, writes no result.json, and once done its
results table's first score per task is the Trend. Bring-up bars (weights, graph capture, the
``datasets`` library's map bars) are never progress.
"""

from __future__ import annotations

import re

from probes.logs.bar_lines import TqdmBar, parse_tqdm
from probes.logs.lines import strip_ansi
from probes.logs.progress import sec_per_it
from probes.models import JobState
from report.cells import format_duration
from report.findings import Findings, JudgeContext, Priority
from report.harbor_engine import fresh_ok
from report.harbor_trials import infra_signals
from report.trend import shorten

GENERATION_DESCS = ("Processed prompts",)
"""The descs of an offline engine's generation bar: vLLM's ``LLM.generate`` (its
``tqdm_desc`` default, vllm/entrypoints/llm.py). Loading, graph-capture and request-adding bars
are bring-up, not generation."""


def generation_bar(line: str, descs: tuple[str, ...] = GENERATION_DESCS) -> TqdmBar | None:
    """A redraw of a bar with one of ``descs`` (by default an offline generation bar,
    ``Processed prompts:  45%|...| 4500/10000 [...]``)."""
    if not any(desc in line for desc in descs):
        return None
    bar = parse_tqdm(strip_ansi(line).lstrip())
    return bar if bar is not None and bar.desc in descs and bar.total > 0 else None


def _kept_lines(ctx: JudgeContext) -> list[str]:
    """The log's kept last lines (``probes.logs.excerpt``): its text, else its last context."""
    log = ctx.facts.log
    if log is None:
        return []
    return (log.text or log.last_context or "").splitlines()


def _kept_lm_eval_scores(ctx: JudgeContext) -> list[tuple[str, str, str]]:
    """``lm_eval_scores`` of the kept lines; a text with no ``Version`` column header holds no
    table (one substring pass instead of a regex per line: most eval and catch-all logs)."""
    log = ctx.facts.log
    if log is None or "Version" not in (log.text or log.last_context or ""):
        return []
    return lm_eval_scores(_kept_lines(ctx))


def last_bar(ctx: JudgeContext, descs: tuple[str, ...] = GENERATION_DESCS) -> TqdmBar | None:
    log = ctx.facts.log
    if log is None:
        return None
    for text in (log.text, log.last_context or ""):
        if not any(desc in text for desc in descs):
            continue  # one pass over the text, not one per line (most logs draw no such bar)
        for line in reversed(text.splitlines()):
            bar = generation_bar(line, descs)
            if bar is not None:
                return bar
    return None


def _bar_text(bar: TqdmBar, what: str) -> str:
    """``4500/10000 prompts (45%), ETA 2m``: a bar's progress, its ETA from tqdm's rate."""
    text = f"{bar.current}/{bar.total} {what} ({100.0 * bar.current / bar.total:.0f}%)"
    per_it = sec_per_it(bar.rate)
    if bar.current < bar.total and per_it is not None:
        text += f", ETA {format_duration(per_it * (bar.total - bar.current))}"
    return text


def offline_generation(ctx: JudgeContext, f: Findings) -> bool:
    """A datagen job with no trial tree whose log shows an offline engine generating (vLLM's
    ``Processed prompts`` bar past 0), or a served engine answering its client: healthy, the
    progress and ETA in the Trend, not the buffer table's bring-up (prompts and requests are
    no Harbor trials: no Trials count)."""
    bar = last_bar(ctx)
    if bar is not None and bar.current > 0:
        f.verdict("healthy")
        f.trend(Priority.BACKGROUND, "Generating: " + _bar_text(bar, "prompts"))
        return True
    return _served_generation(ctx, f)

_BRING_UP_BAR = re.compile(
    r"^(?:Loading|Capturing|Compiling|Downloading|Fetching|Adding requests|Map|Filter|"
    r"Generating (?:train|test|validation) split|Running tokenizer|Tokeniz|Converting)",
    re.IGNORECASE)
"""Bars that are bring-up, not a client's requests: weights and graph capture, and the
``datasets`` library's loading and map bars (also told by their ``examples/s`` rate)."""


def _served_generation(ctx: JudgeContext, f: Findings) -> bool:
    """A served engine (``vllm serve``, SGLang) answering this job's client: a 200 within the
    idle window, or requests running at its latest stats line (and no ``engine-idle``). The
    client's own request bar, when it drew one, gives the progress."""
    infra = infra_signals(ctx)
    running = infra.engine_running_requests
    if "engine-idle" in f.flags or not (fresh_ok(ctx) or (running or 0) > 0):
        return False
    f.verdict("healthy")
    serving = "engine serving" + (f" ({running} running)" if running is not None else "")
    bar = _client_bar(ctx)
    f.trend(Priority.BACKGROUND, "Generating: " + (
        f"{_bar_text(bar, 'requests')}; {serving}" if bar is not None else serving))
    return True


def _client_bar(ctx: JudgeContext) -> TqdmBar | None:
    """The newest moved tqdm bar of the log that is no bring-up or dataset bar."""
    for line in reversed(_kept_lines(ctx)):
        if "%|" not in line:
            continue
        bar = parse_tqdm(strip_ansi(line).lstrip())
        if (bar is None or bar.total <= 0 or bar.current <= 0 or "examples" in bar.rate
                or _BRING_UP_BAR.match(bar.desc)):
            continue
        return bar
    return None

LM_EVAL_DESCS = ("Running loglikelihood requests", "Running generate_until requests",
                 "Running loglikelihood_rolling requests", "Requesting API")
"""lm-evaluation-harness's request bars (lm_eval/models: ``tqdm(desc="Running {type}
requests")``; its API models, ``local-completions`` against a served model,
``desc="Requesting API"``): an lm-eval run is live while they move; it writes no Harbor
result.json."""

_LM_EVAL_HEAD = re.compile(r"^\|\s*Tasks?\s*\|\s*Version\s*\|\s*Filter\s*\|")

_SCORES_SHOWN = 3


def lm_eval_scores(lines: list[str]) -> list[tuple[str, str, str]]:
    """The last lm-eval results table (``make_table``: ``|Tasks|Version|Filter|n-shot|Metric|
    |Value| |Stderr|``, older ``|Task|Version|Filter|Metric|Value| |Stderr|``) as ``(task,
    metric, value)``: each top-level task's first scored row (a subtask, `` - name`` or an
    alias row naming one, is left out). Terminal escapes are left out as the log excerpt
    leaves them out (``probes.logs.lines.strip_ansi``)."""
    start = next((i for i in range(len(lines) - 1, -1, -1)
                  if _LM_EVAL_HEAD.match(lines[i].strip())), None)
    if start is None:
        return []
    header = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    if "Metric" not in header or "Value" not in header:
        return []
    metric_at, value_at = header.index("Metric"), header.index("Value")
    scores: list[tuple[str, str, str]] = []
    task: str | None = None
    for line in lines[start + 2:]:
        row = strip_ansi(line).strip()
        if not row.startswith("|"):
            break
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) <= max(metric_at, value_at):
            continue
        if cells[0]:
            task = None if cells[0].startswith("-") else cells[0]
        metric, value = cells[metric_at], cells[value_at]
        if task is None:
            continue
        if metric == "alias":
            if value.startswith("-"):  # the older table's subtask ("mmlu_humanities")
                task = None
            continue
        if any(name == task for name, _, _ in scores):
            continue
        try:
            float(value)
        except ValueError:
            continue
        scores.append((task, metric, value))
    return scores


def lm_eval_progress(ctx: JudgeContext, lm_bar: TqdmBar) -> str:
    """lm-eval's request bar, or vLLM's own generation bar when that was drawn after it: lm-eval's
    vLLM backend hands a whole chunk to ``LLM.generate`` (``use_tqdm`` under ``batch_size
    auto``), and its own bar waits until the chunk returns."""
    newest = last_bar(ctx, LM_EVAL_DESCS + GENERATION_DESCS)
    if newest is not None and newest.desc in GENERATION_DESCS and newest.current > 0:
        return (f"lm-eval generating: {_bar_text(newest, 'prompts')} "
                f"(requests {lm_bar.current}/{lm_bar.total})")
    return "lm-eval: " + _bar_text(lm_bar, "requests")


def is_lm_eval_run(ctx: JudgeContext) -> bool:
    """An lm-evaluation-harness run (its request bars or results table, no Harbor trial): the
    agentic launch checks of the Infra column (tunnel, sandbox api_base, engine POSTs) do not
    apply to it; where its log shows them anyway (an engine it serves from), they are kept."""
    tree = ctx.facts.trials
    if tree is not None and tree.exists and tree.trials:
        return False
    return last_bar(ctx, LM_EVAL_DESCS) is not None or bool(_kept_lm_eval_scores(ctx))


def lm_eval_scores_note(ctx: JudgeContext, f: Findings) -> None:
    """A finished lm-eval run's scores in the Trend (above "Completed": they are its result)."""
    if ctx.state is not JobState.COMPLETED:
        return
    scores = _kept_lm_eval_scores(ctx)
    if not scores:
        return
    text = " · ".join(f"{task} {metric} {value}" for task, metric, value in
                      scores[:_SCORES_SHOWN])
    if len(scores) > _SCORES_SHOWN:
        text += f" (+{len(scores) - _SCORES_SHOWN} more)"
    f.notes.append(text)
    f.trend(Priority.BACKGROUND + 3, shorten(text, 300))
