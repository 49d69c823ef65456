"""The collector's fast listing (probes.remote.collector ``_listing_specs``): the running jobs
``squeue -O`` names are read and sent while ``squeue --json`` runs, and stand only where the
document gives them the very spec they were read with.

The stand-in ``squeue`` (``conftest.fake_squeue_bin``) prints the listing from the same
document as its ``--json``, or a listing as told (``squeue.listing``), and can hold ``--json``
back; the last test reads the real SLURM 22.05 over SSH (array tasks, a hetjob, a hostile name).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.remote.collector import LISTING_FIELDS, listing_argv, listing_jobs
from probes.remote.script import build_collector_script
from probes.slurm.answer import AnswerReader, read_whole, stream_answer
from probes.slurm.cursors import LogState
from probes.slurm.early import EarlyFolds, folder
from probes.slurm.parse import records_from_squeue
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_stream import (
    NOW,
    USER,
    Collector,
    _probe,
    _queue_request,
    _shipped,
    world,
)

DELIM = "|Jdeadbeef01234567|"


def _row(values: list[str], delim: str = DELIM) -> str:
    """One listing row of ``LISTING_FIELDS``; seven values leave out HetJobID and
    HetJobOffset (``N/A`` both: not a hetjob component, as squeue prints it), seven or nine
    leave out STDERR (the StdOut pattern: no ``-e``, as squeue prints it), and seven, nine or
    ten leave out Command (``(null)``: a ``--wrap`` job, as squeue prints it)."""
    whole = len(LISTING_FIELDS) - 1  # without Command
    if len(values) == whole - 3:
        values = [*values[:3], "N/A", "N/A", *values[3:]]
    if len(values) == whole - 1:
        values = [*values[:-1], values[-2], values[-1]]
    if len(values) == whole:
        values = [*values[:-1], "(null)", values[-1]]
    return "".join(v + delim for v in values) + "\n"


def _no_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's request without the listing (the baseline it must equal)."""
    built = SlurmProbe._queue_request

    def request(self: SlurmProbe, *args: Any) -> dict[str, Any]:
        out = built(self, *args)
        out["squeue"]["listing"] = False
        return out

    monkeypatch.setattr(SlurmProbe, "_queue_request", request)


# -- the listing's rows ----------------------------------------------------------------------


def test_rows_read_as_job_objects_and_a_name_is_data() -> None:
    hostile = f"a\nb|x| {DELIM[:-1]} %j $(touch /tmp/p)`id`;'"
    out = (_row(["12", "12", "N/A", "N/A", "N/A", "alice", "/w", "/w/o_%j.out", "plain"])
           + _row(["15", "14", "1", "N/A", "N/A", "bob", "/w b", "/w b/%A_%a.out", hostile])
           + _row(["x7", "7", "N/A", "N/A", "N/A", "carol", "/w", "/w/o", "not a number"])
           + _row(["9", "9", "N/A", "N/A", "N/A", "", "/w", "/w/o", "no user"])
           + _row(["21", "21", "N/A", "20", "1", "dan", "/w", "/w/h_%j.out", "het"])
           + "16" + DELIM + "16" + DELIM + "N/A")  # cut short: no row
    jobs = listing_jobs(out, DELIM)
    assert [j["job_id"] for j in jobs] == [12, 15, 21]
    assert jobs[0] == {"job_id": 12, "array_job_id": 12, "array_task_id": None,
                       "het_job_id": 0, "het_job_offset": None,
                       "user_name": "alice", "name": "plain",
                       "current_working_directory": "/w", "standard_output": "/w/o_%j.out",
                       "standard_error": "/w/o_%j.out", "command": "(null)",
                       "job_state": "RUNNING"}
    assert jobs[1]["name"] == hostile and jobs[1]["array_task_id"] == 1
    assert (jobs[2]["het_job_id"], jobs[2]["het_job_offset"]) == (20, 1)
    assert jobs[1]["array_job_id"] == 14


def test_a_name_opening_with_a_newline_is_no_row_end() -> None:
    """A field, then a name that opens with a newline: the delimiter + newline between them is
    not the row's end (rows are counted in fields)."""
    out = (_row(["1", "1", "N/A", "u", "/w", "", "\n"]) + _row(["2", "2", "N/A", "u", "", "",
                                                                  "\n2"]))
    assert [(j["job_id"], j["standard_output"], j["name"]) for j in listing_jobs(out, DELIM)] \
        == [(1, "", "\n"), (2, "", "\n2")]


def test_the_argv_is_one_squeue_and_the_users_one_value() -> None:
    argv = listing_argv(["alice", "-x"], DELIM)
    assert argv[:4] == ["squeue", "-h", "-t", "RUNNING"]
    assert argv[4] == "--user=alice,-x" and argv[5] == "-O"
    assert argv[6].split(",") == [f"{f}:{DELIM}" for f in LISTING_FIELDS]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_user = st.from_regex(r"[a-z_][a-z0-9_-]{0,15}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**9), st.one_of(st.none(), st.integers(0, 10**6)),
                          _user, _text, _text, _text), max_size=8))
def test_any_rows_read_back_whatever_their_text(rows: list[tuple[Any, ...]]) -> None:
    """Names, paths and workdirs of any text (newlines, pipes, the delimiter's halves)."""
    out = "".join(_row([str(job), str(job), "N/A" if task is None else str(task), user,
                        workdir, stdout, name])
                  for job, task, user, workdir, stdout, name in rows)
    got = listing_jobs(out, DELIM)
    assert [(j["job_id"], j["array_task_id"], j["user_name"], j["current_working_directory"],
             j["standard_output"], j["name"]) for j in got] == rows


# -- the stream ------------------------------------------------------------------------------


def test_running_jobs_come_before_the_head_and_stand(tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 5)
    lines = _shipped(_queue_request(tmp_path, squeue_bin, listing=True), squeue_bin)
    plain = _shipped(_queue_request(tmp_path, squeue_bin), squeue_bin)
    rows = lines.splitlines()
    assert [r.split("\t", 1)[0] for r in rows[:5]] == ids  # the jobs first
    head = json.loads(rows[5])
    assert head["part"] == "head" and head["order"] == ids and head["sent"] == ids
    assert len(rows) == 7  # the jobs, the head, the end: none read twice
    fast, slow = read_whole(lines), read_whole(plain)
    a, b = fast.answer(), slow.answer()
    assert a is not None and b is not None and fast.ended and not fast.missing
    assert list(a["jobs"]) == list(b["jobs"]) == ids and fast.ignored == 0
    for key in ids:
        assert a["jobs"][key]["log"]["text"] == b["jobs"][key]["log"]["text"]
    assert a["squeue"] == b["squeue"]


def test_a_listing_the_document_contradicts_is_read_again(tmp_path: Path) -> None:
    """A listed job whose path differs from the document's, and one the document does not
    have: both early lines are dropped, the first job read again from the document's spec."""
    squeue_bin, ids = world(tmp_path, 3)
    logs = tmp_path / "logs"
    (logs / "decoy.out").write_text("decoy line\n")
    (tmp_path / "squeue" / "squeue.listing").write_text(
        _row([ids[0], ids[0], "N/A", USER, str(tmp_path), str(logs / "decoy.out"), "sft-0"],
             "{D}")
        + _row(["9999", "9999", "N/A", USER, str(tmp_path), str(logs / "decoy.out"), "x"],
               "{D}")
        + _row([ids[1], ids[1], "N/A", USER, str(tmp_path), str(logs / f"train_{ids[1]}.out"),
                "sft-1"], "{D}"))
    reader = read_whole(_shipped(_queue_request(tmp_path, squeue_bin, listing=True),
                                 squeue_bin))
    got = reader.answer()
    assert got is not None and reader.head is not None and reader.head["sent"] == [ids[1]]
    assert list(got["jobs"]) == [ids[1], ids[0], ids[2]]  # the one that stood, then the rest
    assert "9999" not in got["jobs"] and reader.ignored == 2
    for key in ids:
        assert got["jobs"][key]["log"]["path"] == str(logs / f"train_{key}.out")
        assert "decoy" not in got["jobs"][key]["log"]["text"]


def test_a_listed_job_of_another_user_is_not_read(tmp_path: Path) -> None:
    """Whatever squeue lists, only the asked users' jobs are read early."""
    squeue_bin, ids = world(tmp_path, 2)
    logs = tmp_path / "logs"
    (tmp_path / "squeue" / "squeue.listing").write_text(
        _row(["8888", "8888", "N/A", "mallory", str(tmp_path), str(logs / f"train_{ids[0]}.out"),
              "x"], "{D}")
        + _row([ids[1], ids[1], "N/A", USER, str(tmp_path), str(logs / f"train_{ids[1]}.out"),
                "sft-1"], "{D}"))
    lines = _shipped(_queue_request(tmp_path, squeue_bin, listing=True), squeue_bin)
    rows = lines.splitlines()
    head_at = next(n for n, row in enumerate(rows) if row.startswith("{"))
    assert [row.split("\t", 1)[0] for row in rows[:head_at]] == [ids[1]]  # before the head
    got = read_whole(lines).answer()
    assert got is not None and list(got["jobs"]) == [ids[1], ids[0]]


def test_a_failed_listing_is_the_plain_answer(tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 2)
    (tmp_path / "squeue" / "squeue.listing").write_text("squeue: error: not now\n")
    lines = _shipped(_queue_request(tmp_path, squeue_bin, listing=True), squeue_bin)
    assert json.loads(lines.splitlines()[0])["sent"] == []
    got = read_whole(lines).answer()
    assert got is not None and list(got["jobs"]) == ids


async def test_jobs_are_folded_while_squeue_json_still_runs(tmp_path: Path) -> None:
    """``squeue --json`` held back: every running job is folded before the head exists."""
    squeue_bin, ids = world(tmp_path, 4)
    (tmp_path / "squeue" / "squeue.hold").write_text("")
    fold = folder(None, aliases={}, benign_patterns=())
    early = EarlyFolds(fold, cluster="s", now=NOW, users=(USER,),
                       since=datetime(2000, 1, 1, tzinfo=UTC))
    reader = AnswerReader(on_head=early.head, on_job=early.job, on_early=early.before_head)
    script = build_collector_script(_queue_request(tmp_path, squeue_bin, listing=True))
    task = asyncio.ensure_future(stream_answer(Collector(squeue_bin), script, reader))
    for _ in range(3000):  # waits for the parse, whatever the machine's speed; not a timing
        if early.folded >= 4 or task.done():
            break
        await asyncio.sleep(0.01)
    assert early.folded == 4 and reader.head is None and not task.done()
    (tmp_path / "squeue" / "squeue.go").write_text("")
    res = await task
    assert res.exit_status == 0 and reader.ended and sorted(reader.jobs) == ids
    assert early.folded == 4  # nothing folded twice


async def test_the_facts_are_those_without_the_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold and then warm (resumed from the states), job for job: the listing changes when
    jobs are read and folded, never what the sweep finds."""
    squeue_bin, ids = world(tmp_path, 6)
    fast_probe, slow_probe = _probe(Collector(squeue_bin)), _probe(Collector(squeue_bin))
    fast = await fast_probe.collect_since({})
    with monkeypatch.context() as patch:
        _no_listing(patch)
        slow = await slow_probe.collect_since({})
    _same(fast[0].jobs, slow[0].jobs, ids)
    assert fast[1].keys() == slow[1].keys() == set(ids)
    for n, key in enumerate(ids):  # three more steps in half the logs
        if n % 2:
            with (tmp_path / "logs" / f"train_{key}.out").open("a") as fh:
                fh.write("".join(f"{{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 1.{s}}}\n"
                                 for s in range(3)))
    warm_fast = await fast_probe.collect_since(fast[1])
    with monkeypatch.context() as patch:
        _no_listing(patch)
        warm_slow = await slow_probe.collect_since(slow[1])
    _same(warm_fast[0].jobs, warm_slow[0].jobs, ids)
    assert all(j.summary is not None and j.summary.points for j in warm_fast[0].jobs)
    assert _states(warm_fast[1]) == _states(warm_slow[1])


def _same(a: tuple[JobFacts, ...], b: tuple[JobFacts, ...], ids: list[str]) -> None:
    assert [j.record.job_id for j in a] == [j.record.job_id for j in b] == ids
    for x, y in zip(a, b, strict=True):
        assert x == y
        assert x.record.name == y.record.name and x.record.name.startswith("sft-")


def _states(states: dict[str, LogState]) -> dict[str, Any]:
    return {k: (s.cursor, s.recent, s.recent_offset, s.recent_line) for k, s in states.items()}


def test_a_stand_in_fold_is_the_record_fold(tmp_path: Path) -> None:
    """What a fold returns does not depend on the record beyond its id: folded against the
    stand-in and given the record after, it is the fold against the record."""
    squeue_bin, ids = world(tmp_path, 3)
    reader = read_whole(_shipped(_queue_request(tmp_path, squeue_bin), squeue_bin))
    got = reader.answer()
    assert got is not None
    records = {r.job_id: r for r in records_from_squeue(
        got["squeue"]["json"], cluster="s", now=NOW, users=None, since=None)}
    for prior in (None, {}):
        fold = folder(prior, aliases={}, benign_patterns=())
        early = EarlyFolds(fold, cluster="s", now=NOW)
        for key in ids:
            early.before_head(key, got["jobs"][key])
            record = records[key]
            taken = early.take(record, got["jobs"][key])
            assert taken is not None and taken[0].record is record
            assert taken[0] == fold(record, got["jobs"][key])[0]
            other: dict[str, Any] = dict(got["jobs"][key])  # not the very entry folded
            assert early.take(record, other) is None


def test_a_stand_in_is_only_an_id() -> None:
    stand_in = EarlyFolds(folder(None, aliases={}, benign_patterns=()), cluster="c").stand_in("5_1")
    assert stand_in == SchedulerRecord(cluster="c", job_id="5_1", name="", state=JobState.RUNNING)


# -- the real SLURM 22.05 over SSH -------------------------------------------------------------


@pytest.fixture
def odd_jobs(slurm_env: SlurmEnv) -> Iterator[tuple[str, list[str]]]:
    """Running: a 2-task array and a job with a hostile name. (A hetjob does not start on the
    one-node test cluster; its components' keys are their own ids, read like any job's.)"""
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/listing-{tag}"
    hostile = f"x'; touch {run_dir}/p #\n$(id)|{tag}|"

    async def submit() -> list[str]:
        runner = SshRunner(slurm_env.cluster())
        try:
            await runner.run(["mkdir", "-p", run_dir])
            wrap = "echo step 1; echo step 2; sleep 300"
            ids = []
            for argv in (["-a", "1-2", "-J", f"arr-{tag}", "-o", f"{run_dir}/arr_%A_%a.out"],
                         ["-J", hostile, "-o", f"{run_dir}/odd_%j.out"]):
                res = await runner.run(["sbatch", "--parsable", "--chdir", run_dir, *argv,
                                        "--wrap", wrap])
                ids.append(res.stdout.strip().split(";")[0])
            return ids
        finally:
            await runner.aclose()

    ids = asyncio.run(submit())
    try:
        yield run_dir, ids
    finally:
        async def clean() -> None:
            runner = SshRunner(slurm_env.cluster())
            try:
                await runner.run(["scancel", *ids], check=False)
                await runner.run(["rm", "-rf", "--", run_dir], check=False)
            finally:
                await runner.aclose()
        asyncio.run(clean())


def test_real_arrays_hetjobs_and_hostile_names_are_read_early(
        slurm_env: SlurmEnv, odd_jobs: tuple[str, list[str]]) -> None:
    """On SLURM 22.05 the listing gives every running job the spec its document gives:
    array tasks (``A_T``) and a name with a newline stand."""
    run_dir, ids = odd_jobs
    cluster = slurm_env.cluster(users=(slurm_env.user,), recent_hours=1.0)
    probe = SlurmProbe(cluster)

    async def read() -> AnswerReader:
        runner = SshRunner(cluster)
        try:
            reader = AnswerReader()
            request = probe._queue_request(datetime.now(UTC), [slurm_env.user], None, False)
            await stream_answer(runner, build_collector_script(request), reader)
            return reader
        finally:
            await runner.aclose()

    mine: list[str] = []
    for _ in range(60):  # until every one of them runs (bounded; the node may be busy)
        reader = asyncio.run(read())
        assert reader.head is not None and reader.ended
        mine = [k for k, e in reader.jobs.items()
                if str((e.get("log") or {}).get("path") or "").startswith(run_dir + "/")]
        if len(mine) == 3:
            break
        time.sleep(1)
    array, odd = ids
    assert sorted(mine) == sorted([f"{array}_1", f"{array}_2", odd])
    assert set(mine) <= set(reader.head["sent"])  # each read early, none read twice
    for key in mine:
        log = reader.jobs[key]["log"]
        assert log["status"] == "ok" and "step 2" in log["text"]
    assert reader.jobs[f"{array}_2"]["log"]["path"] == f"{run_dir}/arr_{array}_2.out"
    assert not Path(f"{run_dir}/p").exists()


# -- squeue --json started before the collector is compiled ----------------------------------


def test_squeue_json_starts_before_the_collector_is_compiled(tmp_path: Path) -> None:
    """A streamed sweep's script starts ``squeue --json`` in its prologue, before the ~100 KB
    collector is compiled and run (``exec`` of a literal), and the collector takes that very
    process: squeue --json runs once, and the answer is the one without the prologue."""
    import ast

    squeue_bin, ids = world(tmp_path, 3)
    request = _queue_request(tmp_path, squeue_bin, listing=True)
    script = build_collector_script(request)
    body = ast.parse(script).body
    starts = next(n for n, node in enumerate(body) if "Popen" in ast.dump(node))
    compiles = next(n for n, node in enumerate(body)
                    if isinstance(node, ast.Expr) and "'exec'" in ast.unparse(node))
    assert starts < compiles == len(body) - 2  # then main(request), last
    lines = _shipped(request, squeue_bin)
    calls = (tmp_path / "squeue" / "squeue.calls").read_text().splitlines()
    assert [c for c in calls if "--json" in c] == [" ".join(request["squeue"]["argv"][1:])]
    got = read_whole(lines).answer()
    assert got is not None and sorted(got["jobs"]) == ids
    (tmp_path / "squeue" / "squeue.calls").unlink()
    plain = _shipped(_queue_request(tmp_path, squeue_bin, listing=False), squeue_bin)
    assert "EARLY_SQUEUE = subprocess.Popen" not in build_collector_script(
        _queue_request(tmp_path, squeue_bin))
    other = read_whole(plain).answer()
    assert other is not None and sorted(other["jobs"]) == ids
    assert got["squeue"] == other["squeue"]
