"""What a job keeps of its tail (``probes.logs.excerpt.retain``): bounded, and what the report
reads from it is what it read from the whole tail."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logs.excerpt import (
    AGENT_MARKERS,
    CONTEXT_LINES,
    LINE_CHARS,
    MAX_CONTEXTS,
    TAIL_CHARS,
    TAIL_LINES,
    TALLY,
    object_store_trials,
    retain,
)
from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, LogFetch, SchedulerRecord
from report.cleanup import is_agentic
from report.failure_text import log_excerpt
from report.findings import JudgeContext
from report.judge_other import log_note
from report.settings import ReportSettings
from tests.probes.retained import FAULT, HEAD, rl_log
from tests.probes.retained import TALLY as TALLY_LINE
from tests.report.factories import NOW

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in {".out", ".log"}
              and "generators" not in p.parts)
PAD = "".join(f"(raylet) heartbeat {i} ok\n" for i in range(TAIL_LINES + 50))
"""More lines than the kept tail: whatever precedes it is read from above ``text``."""


def kept(text: str) -> LogFetch:
    """The log as assembly keeps it."""
    return retain(LogFetch(status="ok", text=text), parse_log(text))


def facts(text: str, log: LogFetch, state: JobState = JobState.COMPLETED) -> JobFacts:
    record = SchedulerRecord(cluster="a", job_id="7", name="rl-run", state=state)
    return JobFacts(record=record, log=log, summary=parse_log(text))


def what_the_report_reads(job: JobFacts) -> tuple[object, ...]:
    """Every reading of the log text the report makes after the parse."""
    assert job.log is not None
    ctx = JudgeContext(facts=job, history=(), settings=ReportSettings(), now=NOW)
    backed = job.log.trials_in_object_store or object_store_trials(job.log.text)
    return (log_excerpt(job), log_note(ctx), is_agentic(job), backed,
            bool(job.log.text))


def test_short_tail_is_kept_whole() -> None:
    """A tail under both caps is kept as read, numbered from its first line."""
    log = kept("step 1\nstep 2\n")
    assert (log.text, log.text_line, log.contexts, log.tally_line) == (
        "step 1\nstep 2\n", 1, (), None)


@pytest.mark.parametrize(("text", "lines", "chars"), [
    ("".join(f"l{i}\n" for i in range(5000)), TAIL_LINES, None),
    ("".join(f"{i:04d}" + "x" * 195 + "\n" for i in range(5000)), None, TAIL_CHARS),
    ("y" * 100_000, 1, TAIL_CHARS),
    ("a\r\nb\r\n" * 3000, TAIL_LINES, None),
])
def test_kept_text_is_a_suffix_within_caps(text: str, lines: int | None,
                                           chars: int | None) -> None:
    """The kept text is the tail's own end (line ends and all), at most 400 lines and 16 KiB;
    ``text_line`` numbers its first line in the tail."""
    log = kept(text)
    assert text.endswith(log.text)
    assert len(log.text.splitlines()) <= TAIL_LINES and len(log.text) <= TAIL_CHARS
    if lines is not None:
        assert len(log.text.splitlines()) == lines
    if chars is not None:
        assert len(log.text) > chars - 250  # filled up to the last whole line under the cap
    whole = text.splitlines()
    assert whole[log.text_line - 1 :] == log.text.splitlines() or len(log.text) == TAIL_CHARS


def test_fault_far_above_the_tail_keeps_its_context() -> None:
    """``jobtables job``'s excerpt of a fault 11,000 lines up is the same 20 lines it was."""
    text = rl_log(1 << 20)
    log = kept(text)
    whole = facts(text, LogFetch(status="ok", text=text), JobState.FAILED)
    bounded = facts(text, log, JobState.FAILED)
    assert log.text_line > 10_000 and len(log.contexts) == 1
    assert log_excerpt(bounded) == log_excerpt(whole)
    assert len(log_excerpt(bounded).splitlines()) == CONTEXT_LINES
    assert "RuntimeError: CUDA error" in log_excerpt(bounded).splitlines()[CONTEXT_LINES // 2 - 1]


def test_contexts_are_capped() -> None:
    """Only the first three fault lines keep a context, and every kept line is cut at 500."""
    long = "z" * 5000
    text = "".join(f"{long}\n{FAULT}" + PAD for _ in range(5))
    log = kept(text)
    assert len(log.contexts) == MAX_CONTEXTS
    assert [c.line_no for c in log.contexts] == sorted(c.line_no for c in log.contexts)
    assert all(len(line) <= LINE_CHARS for c in log.contexts for line in c.text.splitlines())


def test_tally_line_above_the_kept_lines() -> None:
    """An upload's count printed before 450 lines of noise is still the catch-all note."""
    text = TALLY_LINE + PAD
    log = kept(text)
    assert log.tally_line == TALLY_LINE.rstrip("\n") and TALLY.search(log.text) is None
    assert kept(PAD + TALLY_LINE).tally_line is None  # in the kept lines: read there


def test_marks_are_read_from_the_whole_tail() -> None:
    """The head's agentic object-store trials dir marks the run, 1 MiB later."""
    log = kept(HEAD + rl_log(1 << 20)[len(HEAD):])
    assert log.agent_marked and log.trials_in_object_store
    assert AGENT_MARKERS.search(log.text) is None and not object_store_trials(log.text)
    plain = kept(PAD * 3)
    assert not (plain.agent_marked or plain.trials_in_object_store)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("padded", [False, True], ids=["as-is", "under-450-lines"])
def test_report_reads_the_same_from_kept_and_whole(path: Path, padded: bool) -> None:
    """On every captured log, and with the log pushed above the kept tail, the excerpt, the
    catch-all note, the agentic flavour, the object-store check and the emptiness check are
    what the whole tail gave."""
    text = path.read_text(encoding="utf-8", errors="replace") + (PAD if padded else "")
    whole = facts(text, LogFetch(status="ok", text=text))
    bounded = facts(text, kept(text))
    assert what_the_report_reads(bounded) == what_the_report_reads(whole)


LINES = st.sampled_from([
    "step 3 loss 0.5", "= 2 passed, 1 warning in 3.2s =", "pushing 6,977 ROWS -> org/ds",
    "Loaded 12 Examples", "harbor_trials: 4", "agent_config=terminus-2", "user_agent=curl",
    "AgentTimeoutError: slow", "agenttimeouterror", "generate/avg_num_turns: 3",
    "trials_dir: s3://b/run/", "upload to s3://b/ckpt", "failed: Error running trial",
    "FAILED: error running trial", "x" * 300, "", "Traceback (most recent call last):",
    "RuntimeError: boom", "mini_swe_agent ready", "\x1b[32mharbor\x1b[0m", "ünïcode 3 files",
])


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=60), st.lists(LINES, max_size=5),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_gated_searches_equal_the_regex(head: list[str], tail: list[str], end: str) -> None:
    """The needle-gated whole-tail searches say what the regex over the tail says."""
    text = end.join(head) + end + PAD.replace("\n", end) + end.join(tail)
    log = kept(text)
    assert log.agent_marked == (AGENT_MARKERS.search(text) is not None)
    above = text[: len(text) - len(log.text)].splitlines()
    matching = [line for line in above if TALLY.search(line)]
    in_kept = any(TALLY.search(line) for line in log.text.splitlines())
    assert log.tally_line == (None if in_kept or not matching else matching[-1][:LINE_CHARS])


def test_excerpt_lines_carry_no_terminal_escapes() -> None:
    """Ray's coloured prefixes (``\\x1b[36m(pid=1)\\x1b[0m``) are shown without their escape
    codes, in the kept last lines and in a fault's context (the ESC byte was dropped later
    and ``[36m`` shown)."""
    text = "".join(f"\x1b[36m(skyrl_entrypoint pid=48213)\x1b[0m step {n}\n" for n in range(30))
    text += "\x1b[36m(pid=48213)\x1b[0m torch.OutOfMemoryError: CUDA out of memory.\n"
    for with_fault in (False, True):
        body = text if with_fault else text.rsplit("\x1b[36m(pid", 1)[0]
        fetch = LogFetch(requested_path="/l", path="/l", status="ok", text=body)
        summary = parse_log(body)
        assert bool(summary.faults) is with_fault
        facts = JobFacts(record=SchedulerRecord(cluster="c", job_id="1", name="x",
                                                state=JobState.FAILED),
                         log=retain(fetch, summary), summary=summary)
        shown = log_excerpt(facts)
        assert "(skyrl_entrypoint pid=48213) step 29" in shown or with_fault
        assert "\x1b" not in shown and "[36m" not in shown and "[0m" not in shown
