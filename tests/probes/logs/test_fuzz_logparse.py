"""parse_log never raises: random bytes, huge lines, NaN/inf, cut dicts, mixed encodings."""

from __future__ import annotations

import logging
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.parse import parse_log
from probes.models import LogSummary
from probes.remote.completion import parse_trainer_log_jsonl

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FRAGMENTS = [
    "Step 12: \n",
    "{'policy/policy_entropy': '0.5127',\n",
    " 'policy/raw_grad_norm': 'nan',\n",
    " 'trainer/global_step': 12}\n",
    "{'loss': '5.997', 'grad_norm': 'inf', 'epoch': '0.1'}\n",
    "{'loss': nan, 'grad_norm': -inf, 'learning_rate': np.float64(1e-06)",
    "step:3 - actor/entropy:np.float64(nan) - actor/grad_norm:-inf - x:",
    "reward/avg_pass_at_8: 0.625, reward/avg_raw_reward: ",
    "\r  35%|███▍      | 320/916 [12:34<22:10,  2.35s/it]",
    "\rMap: 100%|██████████| 52002/52002 [00:12<00:00, 4213.33 examples/s]",
    "\x1b[0;36m(Worker_TP2 pid=481418)\x1b[0;0m ",
    "\x1b[?25l\x1b[2K\x1b",
    "(TaskRunner pid=1, ip=10.0.0.1) ",
    '{"current_steps": 10, "total_steps": ',
    "Total optimization steps = 9,999,999,999,999,999,999,999",
    "step:99999999999999999999999 - actor/entropy:1e999",
    "12/100 Mean: nan\n",
    "Successfully saved checkpoint for global_step_",
    "\n",
    "\r",
]


class _Errors(logging.Handler):
    """Collects records parse_log logs when its internal guard catches a bug."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


GUARD = _Errors()
logging.getLogger("probes.logs.parse").addHandler(GUARD)


def assert_summary(summary: LogSummary) -> None:
    """Every point is in step order and no internal bug was caught and logged by the guard."""
    assert GUARD.records == [], [r.getMessage() for r in GUARD.records]
    steps = [p.step for p in summary.points]
    assert steps == sorted(steps)
    for point in summary.points:
        assert all(isinstance(v, float) for v in point.values.values())


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes) -> None:
    """Arbitrary bytes decode and parse without raising."""
    assert_summary(parse_log(data))


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40), st.text(max_size=200))
def test_shuffled_real_fragments(pieces: list[str], noise: str) -> None:
    """Real-format fragments in any order, cut anywhere, with noise, never raise."""
    text = noise.join(pieces)
    assert_summary(parse_log(text))
    assert_summary(parse_log(text[len(text) // 3 :]))


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80).map(lambda s: s.encode("utf-8", "surrogatepass")),
            st.text(max_size=40).map(lambda s: s.encode("utf-16")),
            st.text(
                alphabet=st.characters(max_codepoint=255, exclude_categories=("Cs",)), max_size=80
            ).map(lambda s: s.encode("latin-1")),
            st.sampled_from(FRAGMENTS).map(str.encode),
        ),
        max_size=30,
    )
)
def test_mixed_encodings(chunks: list[bytes]) -> None:
    """UTF-8, UTF-16 and latin-1 fragments mixed in one tail never raise."""
    assert_summary(parse_log(b"".join(chunks)))


@FUZZ
@given(st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 10**6))
def test_non_finite_values_kept_as_floats(value: float, step: int) -> None:
    """NaN and inf values survive as floats in a verl line."""
    summary = parse_log(f"step:{step} - actor/grad_norm:{value!r}\n")
    got = summary.points[0].values["grad_norm"]
    assert (math.isnan(got) and math.isnan(value)) or got == value


@FUZZ
@given(st.text(max_size=300))
def test_jsonl_never_raises(text: str) -> None:
    """The completion check tolerates any text, and what it says is consistent with it."""
    status = parse_trainer_log_jsonl(text)
    assert 0 <= status["records"] <= len(text.splitlines())
    assert (status["current_steps"] is None) == (status["records"] == 0)
    assert status["finished"] == (
        status["current_steps"] is not None and bool(status["total_steps"])
        and status["current_steps"] >= status["total_steps"] > 0)


def test_one_megabyte_lines_truncated() -> None:
    """1 MB lines of dict-like and bar-like junk are truncated and parsed."""
    dict_line = "{" + "'k': '1', " * 100_000 + "\n"
    bar_line = "%|" * 500_000 + "\n"
    summary = parse_log(dict_line + bar_line + "step:1 - actor/entropy:0.5\n")
    assert_summary(summary)
    assert summary.points[-1].values == {"entropy": 0.5}


def test_five_megabyte_single_line_returns() -> None:
    """A 5 MB line without a newline returns (bounded by max_line_chars), with the line counted."""
    line = ("step:1 - actor/entropy:0.5 - " + "\x1b[31m" + "x" * 97) * 40_000
    summary = parse_log(line[: 5 * 1024 * 1024])
    assert_summary(summary)
    assert summary.line_count == 1


def test_deeply_nested_json_in_jsonl() -> None:
    """A pathological nested record is skipped, not a RecursionError."""
    text = "[" * 100_000 + "\n" + '{"current_steps": 3, "total_steps": 3}\n'
    assert parse_trainer_log_jsonl(text)["finished"]
