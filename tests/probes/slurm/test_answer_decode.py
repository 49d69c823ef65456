"""A line of the collector's answer decodes to exactly what ``json.loads`` gives, or fails alike.

``probes.slurm.answer.loads`` reads lines with pydantic-core's parser and hands what it refuses
to ``json.loads``. The reference is ``json.loads`` itself: for drawn JSON documents (any
value, ASCII-escaped or not, odd floats, big integers, NaN and infinities, duplicate keys),
for drawn and mutated bytes, for a table of the inputs the two parsers are known to treat
apart, and for every line of the answers the collector gives in the stream tests, the value
(compared with its types, ``-0.0`` and NaN included) or the error (type and message) is the
same; and a sweep over every log fixture gives the facts it gives with ``json.loads``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.slurm import answer
from probes.slurm.answer import AnswerReader, loads, read_whole
from tests.probes.logs.test_recent import LOG_FIXTURES
from tests.probes.slurm.conftest import fake_squeue_bin
from tests.probes.slurm.test_stream import REAL, USER, Collector, _probe, _queue_request, _shipped

PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def shape(value: Any) -> Any:
    """``value`` with every leaf tagged by its exact type (so ``1 != 1.0``, ``-0.0 != 0.0``
    and a NaN equals a NaN: a ``model_dump`` compares so too)."""
    if isinstance(value, dict):
        return ("dict", [(k, shape(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    return (type(value).__name__, value)


def outcome(read: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "value", shape(read(raw))
    except (ValueError, RecursionError) as exc:
        return "error", (type(exc), str(exc))


def same_as_json(raw: bytes) -> None:
    assert outcome(loads, raw) == outcome(json.loads, raw)


leaves = (st.none() | st.booleans() | st.integers() | st.integers(-(10 ** 40), 10 ** 40)
          | st.floats() | st.floats(allow_infinity=False, allow_nan=False, width=32)
          | st.text() | st.sampled_from(["", "\n", "\\", '"', "\t", "é", "😀", "\x00", "\x7f"]))
documents = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=5),
    max_leaves=40)


@PROPERTY
@given(documents, st.booleans(), st.sampled_from([None, 0, 2]))
def test_drawn_documents(doc: Any, ascii_only: bool, indent: int | None) -> None:
    """Any document ``json.dumps`` writes (``\\uXXXX`` escapes or raw UTF-8) decodes to what
    ``json.loads`` gives."""
    text = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    same_as_json(text.encode("utf-8", "surrogatepass"))


@PROPERTY
@given(st.binary(max_size=64))
def test_drawn_bytes(raw: bytes) -> None:
    """Arbitrary bytes: the same value or the same error."""
    same_as_json(raw)


@PROPERTY
@given(documents, st.data())
def test_mutated_documents(doc: Any, data: st.DataObject) -> None:
    """A document with bytes deleted, replaced or inserted (a line garbled in transit)."""
    raw = bytearray(json.dumps({"log": doc}, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        what = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        byte = data.draw(st.sampled_from(b'{}[]",:\\ \t\n0-.eEuNI\xff\xed\xef'))
        if what == "delete" and at < len(raw):
            del raw[at]
        elif what == "replace" and at < len(raw):
            raw[at] = byte
        else:
            raw.insert(at, byte)
    same_as_json(bytes(raw))


@PROPERTY
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][-+]?[0-9]{1,4})?",
                     fullmatch=True))
def test_drawn_number_spellings(number: str) -> None:
    """Every spelling of a number (long mantissas, huge and tiny exponents) rounds alike."""
    same_as_json(number.encode())
    same_as_json(f'{{"n": [{number}]}}'.encode())


EDGES = [
    b'{"a":1,"a":2}', b'{"a":NaN,"b":Infinity,"c":-Infinity}', b"-NaN", b"nan", b"1e400",
    b"-1e400", b"1.7976931348623159e308", b"2.4703282292062328e-324", b"-0", b"-0.0",
    b"9007199254740993.0", b"1" + b"0" * 5000, b"1" * 4300, b'"\\ud800"', b'"\\udd1e\\ud834"',
    b'"\\ud83d\\ude00"', b'"\xed\xa0\x80"', b'"\xff"', b'"\xc0\x80"', b'"a\x01b"', b'"\t"',
    b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b"\x00{", b"{} x", b"{}  ", b"\t{}\r\n",
    b"\x0c{}", b"[1,]", b'{"a":1,}', b"01", b"+1", b".5", b"1.", b"[" * 300 + b"]" * 300,
    b"[" * 150 + b"]" * 150, b"[" * 100_000, b"", b" ", b'"\\u00"', b'"\\x"', b"{1:2}",
]


@pytest.mark.parametrize("raw", EDGES, ids=range(len(EDGES)))
def test_where_the_parsers_differ(raw: bytes) -> None:
    """The inputs pydantic-core's parser reads differently or refuses: ``json.loads``'s
    outcome (lone surrogates, a BOM, UTF-16, nesting past 200, digits past 4300...)."""
    same_as_json(raw)


def test_a_job_whose_line_is_unreadable_fails_as_before() -> None:
    """The failed entry's reason is ``json.loads``'s own error message."""
    bad = b'{"a": [1, 2'
    reader = AnswerReader()
    reader.line(json.dumps({"protocol": 2, "part": "head", "order": ["7", "8"]}).encode())
    reader.line(b"7\t" + bad)
    reader.line(b'8\t{"log": {"text": "\\ud800 lone", "status": "ok"}}')
    try:
        json.loads(bad)
    except ValueError as exc:
        why = f"collector answer for this job is unreadable: {exc}"
    assert reader.jobs["7"]["log"]["error"] == why
    assert reader.jobs["8"]["log"]["text"] == "\ud800 lone"


def test_a_protocol_1_answer_reads_as_json_loads_reads_it() -> None:
    """A whole document (no stream) is its own head, read as ``json.loads`` reads it."""
    doc = {"protocol": 1, "jobs": {"7": {"log": {"status": "ok", "text": "x\n" * 50,
                                                 "mtime": 1.5e9}}}, "n": -0.0}
    reader = read_whole(json.dumps(doc))
    assert shape(reader.answer()) == shape(doc)


def fixture_world(tmp: Path) -> Path:
    """A RUNNING job of this user per log fixture (its bytes as they are), the stand-in
    squeue's directory."""
    template = next(j for j in json.loads((REAL / "squeue_early.json").read_text())["jobs"]
                    if j["job_state"] == "RUNNING")
    (tmp / "logs").mkdir()
    objects = []
    for n, path in enumerate(LOG_FIXTURES):
        log = tmp / "logs" / f"{n}.out"
        shutil.copyfile(path, log)
        objects.append(dict(template, job_id=7000 + n, name=f"job-{n}", user_name=USER,
                            standard_output=str(log), current_working_directory=str(tmp)))
    document = json.loads((REAL / "squeue_early.json").read_text())
    document["jobs"] = objects
    return fake_squeue_bin(tmp / "squeue", json.dumps(document))


def test_every_line_of_a_collector_answer_over_the_fixtures(tmp_path: Path) -> None:
    """The real collector's answer for every log fixture: each line reads alike."""
    squeue_bin = fixture_world(tmp_path)
    lines = _shipped(_queue_request(tmp_path, squeue_bin), squeue_bin).encode().split(b"\n")
    assert len(lines) == len(LOG_FIXTURES) + 3  # head, the jobs, end, and the last newline
    for raw in lines:
        same_as_json(raw.split(b"\t", 1)[-1])


async def test_a_sweep_over_the_fixtures_gives_the_facts_json_loads_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's facts with the answer read by ``json.loads`` (the reference) are the same."""
    squeue_bin = fixture_world(tmp_path)
    fast = await _probe(Collector(squeue_bin)).collect()
    monkeypatch.setattr(answer, "loads", json.loads)
    reference = await _probe(Collector(squeue_bin)).collect()
    assert fast.status == "ok" and len(fast.jobs) == len(LOG_FIXTURES)
    assert sum(1 for j in fast.jobs if j.summary is not None) == len(LOG_FIXTURES)
    assert shape(fast.model_dump()) == shape(reference.model_dump())
