"""The batched file reader: log location (seed rules), bounded tails, and source shipping."""

from __future__ import annotations

import ast
import getpass
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.models import JobState
from probes.remote import collector, job_files, logread
from probes.remote.script import build_collector_script, collector_source
from probes.remote.stdio_pattern import SQUEUE_JOB_KEYS
from probes.slurm.parse import expand_stdout, records_from_squeue

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
NOW = datetime(2026, 11, 30, tzinfo=UTC)

ROOT = Path(__file__).resolve().parents[3]


def _request(tmp: Path, **job: Any) -> dict[str, Any]:
    base = {"id": "4242", "stdout": None, "workdir": str(tmp), "offset": 0,
            "checkpoint_roots": [], "trial_roots": []}
    base.update(job)
    return {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100, "jobs": [base]}


def _log(answer: dict[str, Any]) -> dict[str, Any]:
    log: dict[str, Any] = answer["jobs"]["4242"]["log"]
    return log


def test_log_at_stdout_is_ok(tmp_path: Path) -> None:
    """A StdOut that exists is read as is."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("step 1\nstep 2\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["path"], log["text"], log["lines"]) == (
        "ok", str(out), "step 1\nstep 2\n", 2)


@pytest.mark.parametrize("name", ["train_4242.out", "rl-run_4242.out", "x-4242.log"])
def test_missing_stdout_falls_back_to_workdir_log(tmp_path: Path, name: str) -> None:
    """StdOut absent, `*_<jobid>.out` in the workdir: read it and say `mismatch`."""
    (tmp_path / name).write_text("real log\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "gone_4242.out"))))
    assert (log["status"], log["path"], log["requested"]) == (
        "mismatch", str(tmp_path / name), str(tmp_path / "gone_4242.out"))


@pytest.mark.parametrize("name", ["train_14242.out", "train_4242.err", "train_42420.out",
                                  "4242"])
def test_near_miss_names_are_not_the_log(tmp_path: Path, name: str) -> None:
    """Another job's id or a non-log suffix is not taken for this job's log."""
    (tmp_path / name).write_text("other\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "gone.out"))))
    assert (log["status"], log["path"]) == ("missing", None)


_OLD_RULE = r"(^|[_.-]){}(\.\d+)?\.(out|log|txt)\Z"
"""The fallback's rule as one regex per job (how it was read before the index)."""
_NAME_PART = st.sampled_from(["12", "3", "12_3", "4", "+", "_", ".", "-", "run", ".out", ".log",
                              ".txt", ".err", "7", "0"])


@settings(max_examples=400, deadline=None)
@given(name=st.lists(_NAME_PART, min_size=1, max_size=7).map("".join),
       key=st.sampled_from(["12", "3", "12_3", "4", "3+4", "12_3_4", "0", "7", "12+3"]))
def test_the_name_index_takes_the_names_the_per_job_rule_takes(name: str, key: str) -> None:
    """``_job_keys`` (a directory indexed once) and the rule ``*_<key>.out`` with its
    separators, suffixes and ``.N`` restart agree on every name and job key."""
    assert (key in job_files._job_keys(name)) == bool(
        re.search(_OLD_RULE.format(re.escape(key)), name))


def test_a_crowded_log_directory_is_read_once_for_every_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many jobs whose StdOut is gone, one directory of thousands of logs: each job finds
    its own log (or none), and the directory's names are looked at once, not once per job
    (each job matched every name before: 17 s for 2,000 jobs in 21,000 files,
    ``tests/bench/bench_locate.py``)."""
    for n in range(2000):
        (tmp_path / f"train_{900000 + n}.out").write_text("x\n")
    ids = [str(100 + n) for n in range(200)]
    for job_id in ids[::2]:
        (tmp_path / f"train_{job_id}.out").write_text(f"job {job_id}\n")
    looked = []
    keys = job_files._job_keys
    monkeypatch.setattr(job_files, "_job_keys", lambda name: looked.append(name) or keys(name))
    request = {"tail_bytes": 4096, "min_lines": 1, "jobs": [
        {"id": i, "stdout": str(tmp_path / f"gone_{i}.out"), "workdir": str(tmp_path),
         "checkpoint_roots": [], "trial_roots": []} for i in ids]}
    jobs = collector.collect(request)["jobs"]
    for n, job_id in enumerate(ids):
        log = jobs[job_id]["log"]
        if n % 2:
            assert (log["status"], log["path"]) == ("missing", None)
        else:
            assert (log["status"], log["text"]) == ("mismatch", f"job {job_id}\n")
    assert len(looked) == 2000 + 100


def test_listing_is_not_recursive(tmp_path: Path) -> None:
    """A matching log in a subdirectory of the workdir is not searched for."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train_4242.out").write_text("deep\n")
    log = _log(collector.collect(_request(tmp_path)))
    assert log["status"] == "missing"


def test_tail_is_bounded_and_starts_at_a_line(tmp_path: Path) -> None:
    """Only the last tail_bytes are read, without a partial first line."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("".join(f"line {i:05d}\n" for i in range(10_000)))
    req = _request(tmp_path, stdout=str(out))
    req["tail_bytes"] = 100
    log = _log(collector.collect(req))
    assert len(log["text"]) <= 100
    assert log["text"].startswith("line ") and log["text"].endswith("line 09999\n")
    assert log["offset"] == out.stat().st_size - len(log["text"].encode())


def test_offset_reads_only_new_bytes(tmp_path: Path) -> None:
    """With the caller's byte offset, only what was appended since is returned."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("old 1\nold 2\n")
    size = out.stat().st_size
    with out.open("a") as fh:
        fh.write("new 3\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out), offset=size)))
    assert (log["text"], log["offset"]) == ("new 3\n", size)


def test_under_the_floor_is_failed_after_one_retry(tmp_path: Path) -> None:
    """A tail with fewer lines than the floor is retried once, then `failed`, never dead."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("only one line\n")
    req = _request(tmp_path, stdout=str(out))
    req["min_lines"] = 5
    log = _log(collector.collect(req))
    assert (log["status"], log["attempts"]) == ("failed", 2)
    assert "floor 5" in log["error"]


def test_empty_log_is_a_fact_not_a_failure(tmp_path: Path) -> None:
    """A job that has printed nothing yet has an empty, readable log."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["size"], log["lines"]) == ("ok", 0, 0)


def test_unreadable_log_is_failed(tmp_path: Path) -> None:
    """A StdOut that exists but is no regular file (here a directory) is `failed` with the
    reason, at once: a refusal is final, a retry would say the same."""
    out = tmp_path / "slurm-4242.out"
    out.mkdir()
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["attempts"]) == ("failed", 1)
    assert log["error"] == f"{out}: not a regular file: not read"


def test_script_is_python37_syntax_with_one_future_line() -> None:
    """The shipped script parses as Python 3.7 and starts with its only __future__ import."""
    script = build_collector_script({"jobs": []})
    ast.parse(script, feature_version=(3, 7))
    assert script.startswith("from __future__ import annotations\n")
    assert len(re.findall(r"^from __future__", script, re.MULTILINE)) == 1
    assert "from probes" not in script


def test_shipped_modules_share_no_top_level_names() -> None:
    """Concatenating reducer, path rules and collector must not let one rebind another's names."""
    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return found - {"Json"}  # the same alias everywhere
    modules = ("harbor_reduce.py", "stdio_pattern.py", "completion.py", "job_files.py",
               "queue_listing.py", "queue_document.py", "collector.py")
    found = [names(ROOT / "probes" / "remote" / m) for m in modules]
    assert all(found)
    for i, first in enumerate(found):
        for second in found[i + 1:]:
            assert first & second == set()


def test_request_rides_as_a_literal_and_cannot_break_out(tmp_path: Path) -> None:
    """Hostile path text in the request stays data: the script runs and nothing executes."""
    marker = tmp_path / "pwned"
    hostile = f"x')\nopen({str(marker)!r}, 'w')\n#\"; touch {marker}; $(id) `id`"
    script = build_collector_script(_request(tmp_path, stdout=hostile))
    run = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         check=True, timeout=60)
    answer = json.loads(run.stdout)
    assert answer["jobs"]["4242"]["log"]["requested"] == hostile
    assert not marker.exists()


def test_shipped_script_answers_like_the_module(tmp_path: Path) -> None:
    """`python3 -` on the built script gives the same answer as collect() in process."""
    (tmp_path / "train_4242.out").write_text("a\nb\n")
    ckpt = tmp_path / "checkpoints"
    (ckpt / "global_step_20").mkdir(parents=True)
    (ckpt / "global_step_10").mkdir()
    req = _request(tmp_path, checkpoint_roots=[str(ckpt)], trial_roots=[str(tmp_path / "jobs")])
    run = subprocess.run(["python3", "-"], input=build_collector_script(req), capture_output=True,
                         text=True, check=True, timeout=60)
    shipped = json.loads(run.stdout)["jobs"]
    local = collector.collect(req)["jobs"]
    for answer in (shipped, local):
        answer["4242"]["log"].pop("mtime")
    assert shipped == local
    assert shipped["4242"]["checkpoints"]["listings"][str(ckpt)] == ["global_step_10",
                                                                     "global_step_20"]


def test_collector_source_is_cached_text() -> None:
    """The script body is built once per process (it is re-sent every sweep)."""
    assert collector_source() is collector_source()


def _queue_request(squeue_file: Path, users: list[str], **extra: Any) -> dict[str, Any]:
    """A one-trip request whose `squeue` is `cat` of a captured `squeue --json`."""
    return {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
            "squeue": {"argv": ["cat", str(squeue_file)], "users": users},
            "roots": {"checkpoint": [], "trial": []}, "offsets": {}, **extra}


@pytest.mark.parametrize("capture", ["squeue.json", "squeue_early.json"])
def test_queue_paths_are_the_probes_paths(capture: str) -> None:
    """On the login node each started job's log path is what the probe's expand_stdout gives."""
    answer = collector.collect_queue(_queue_request(REAL / capture, ["jobtables"]))
    records = records_from_squeue(answer["squeue"]["json"], cluster="c", now=NOW)
    started = {r.job_id: expand_stdout(r).stdout_path for r in records
               if r.state is not JobState.PENDING}
    assert started and answer["unexpanded"] == []
    assert {k: v["log"]["requested"] for k, v in answer["jobs"].items()} == started


def test_queue_keeps_only_the_users_jobs_verbatim() -> None:
    """Other users' job objects are dropped on the login node; the kept ones are unchanged."""
    full = json.loads((REAL / "squeue.json").read_text())
    mine = collector.collect_queue(_queue_request(REAL / "squeue.json", ["jobtables"]))
    none = collector.collect_queue(_queue_request(REAL / "squeue.json", ["alice", "jobtable"]))
    kept = mine["squeue"]["json"]
    assert kept == full and mine["squeue"]["exit"] == 0  # every captured job is jobtables'
    empty = none["squeue"]["json"]
    assert empty["jobs"] == [] and empty["meta"] == full["meta"] and none["jobs"] == {}


@pytest.mark.parametrize("capture", ["squeue.json", "squeue_early.json"])
def test_queue_trims_job_objects_to_the_keys_asked(capture: str) -> None:
    """With `keys`, job objects keep only those keys; records and collected files are unchanged."""
    full = collector.collect_queue(_queue_request(REAL / capture, ["jobtables"]))
    request = _queue_request(REAL / capture, ["jobtables"])
    request["squeue"]["keys"] = list(SQUEUE_JOB_KEYS)
    trimmed = collector.collect_queue(request)
    jobs = trimmed["squeue"]["json"]["jobs"]
    assert jobs and all(set(j) <= set(SQUEUE_JOB_KEYS) for j in jobs)
    assert trimmed["squeue"]["json"]["meta"] == full["squeue"]["json"]["meta"]
    assert records_from_squeue(trimmed["squeue"]["json"], cluster="c", now=NOW) == \
        records_from_squeue(full["squeue"]["json"], cluster="c", now=NOW)
    for answer in (full, trimmed):
        for job in answer["jobs"].values():
            job["log"].pop("mtime", None)
    assert trimmed["jobs"] == full["jobs"] and trimmed["unexpanded"] == full["unexpanded"]


def test_queue_reports_a_failing_squeue_as_it_printed(tmp_path: Path) -> None:
    """squeue's exit status and stderr come back for the probe to judge; nothing is collected."""
    fake = tmp_path / "squeue"
    fake.write_text("#!/bin/sh\necho \"squeue: unrecognized option '--json'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    request = _queue_request(tmp_path / "unused", ["jobtables"])
    request["squeue"]["argv"] = [str(fake), "--json"]
    answer = collector.collect_queue(request)
    assert answer["squeue"]["exit"] == 1 and "unrecognized option" in answer["squeue"]["stderr"]
    assert answer["jobs"] == {}
    missing = dict(request, squeue={"argv": [str(tmp_path / "nope")], "users": []})
    assert collector.collect_queue(missing)["squeue"]["exit"] == 127


def test_queue_lists_unexpandable_paths_and_uses_offsets(tmp_path: Path) -> None:
    """A pattern with a token 22.05 does not know (`%b`) is left to the probe; a known log
    is read from the caller's offset."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    running = [j for j in base["jobs"] if j["job_state"] == "RUNNING"][:2]
    running[0].update(standard_output="%b_%j.out")
    log = tmp_path / "run.out"
    log.write_text("one\ntwo\nthree\n")
    # The collector reads only files the job's user owns: this job is the test runner's.
    running[1].update(standard_output=str(log), user_name=getpass.getuser())
    squeue = tmp_path / "squeue.json"
    squeue.write_text(json.dumps({**base, "jobs": running}))
    answer = collector.collect_queue(_queue_request(squeue, ["jobtables", getpass.getuser()],
                                                    offsets={str(log): 4}))
    assert answer["unexpanded"] == [str(running[0]["job_id"])]
    read = answer["jobs"][str(running[1]["job_id"])]["log"]
    assert (read["status"], read["offset"], read["text"]) == ("ok", 4, "two\nthree\n")


def test_shipped_script_runs_squeue_itself(tmp_path: Path) -> None:
    """`python3 -` on a one-trip script answers like collect_queue() in process."""
    req = _queue_request(REAL / "squeue_early.json", ["jobtables"])
    run = subprocess.run(["python3", "-"], input=build_collector_script(req),
                         capture_output=True, text=True, check=True, timeout=60)
    shipped = json.loads(run.stdout)
    local = collector.collect_queue(req)
    assert shipped["squeue"] == local["squeue"] and shipped["jobs"] == local["jobs"]
    assert shipped["jobs"]


def test_a_last_line_past_the_long_line_scan_says_so_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Step lines, then a last line longer than the tail and the bounded scan before it (a
    trainer dumping an array, a binary blob with no line break): the job is `failed` with that
    reason, read once (a second read would cost the same scan and find the same line).
    Replayed on the real SLURM (sft-longlast: 3 step lines, then 500 MB with no line break):
    'Log fetch failed: 0 lines < floor 1', two 64 MiB scans saying nothing of why."""
    monkeypatch.setattr(logread, "LONG_LINE_SCAN", 4096)
    out = tmp_path / "slurm-4242.out"
    out.write_bytes(b"{'loss': 1.1}\n" * 3 + b"y" * 20_000)
    req = _request(tmp_path, stdout=str(out))
    req["tail_bytes"] = 1024
    log = _log(collector.collect(req))
    assert (log["status"], log["attempts"]) == ("failed", 1)
    assert log["error"] == "last line over 5 KiB"


def _hostile_queue(tmp_path: Path, *, jobs: int, comment_chars: int) -> Path:
    """The captured squeue document with its jobs repeated, each carrying a huge comment,
    command and dependency (a user's thousands of jobs, or a hostile ``--comment``)."""
    data = json.loads((REAL / "squeue.json").read_text())
    template = data["jobs"][0]
    data["jobs"] = []
    for n in range(jobs):
        job = dict(template, job_id=900000 + n, comment="tag=ablation " + "x" * comment_chars,
                   command="/bin/run " + "y" * comment_chars,
                   dependency="afterany:1" + ",afterany:2" * (comment_chars // 11))
        data["jobs"].append(job)
    path = tmp_path / "squeue.json"
    path.write_text(json.dumps(data))
    return path


def test_a_kept_job_objects_strings_are_capped(tmp_path: Path) -> None:
    """A 1 MB comment (and command, dependency) crossed the SSH link whole for every job: the
    sweep's kept keys now carry at most SQUEUE_FIELD_MAX_CHARS of each string, its start
    kept (a comment's tags, the dependency's first edges); the record still reads."""
    path = _hostile_queue(tmp_path, jobs=3, comment_chars=1_000_000)
    request = _queue_request(path, [json.loads(path.read_text())["jobs"][0]["user_name"]])
    request["squeue"]["keys"] = list(SQUEUE_JOB_KEYS)
    answer = collector.collect_queue(request)
    jobs = answer["squeue"]["json"]["jobs"]
    assert len(jobs) == 3
    cap = collector.SQUEUE_FIELD_MAX_CHARS
    assert 1000 <= cap <= 16384
    for job in jobs:
        assert job["comment"].startswith("tag=ablation xxx") and len(job["comment"]) == cap
        assert len(job["command"]) == cap
        # A dependency is cut at its last whole edge: no cut job id names another job.
        assert cap - 11 < len(job["dependency"]) < cap
        assert job["dependency"].startswith("afterany:1,afterany:2,")
        assert job["dependency"].endswith(",afterany:2")
    assert len(collector.encode(answer)) < 3 * 3 * cap + 200_000
    records = records_from_squeue(answer["squeue"]["json"], cluster="c", now=NOW)
    assert [r.job_id for r in records] == ["900000", "900001", "900002"]
    assert all(r.comment and r.comment.startswith("tag=ablation") for r in records)


def test_squeue_output_past_its_cap_is_a_clear_error(tmp_path: Path) -> None:
    """squeue printing more than the cap is not read whole into memory: it is killed and the
    answer says why (a non-zero exit, as a failed squeue reads), naming the cap."""
    path = _hostile_queue(tmp_path, jobs=40, comment_chars=20_000)
    assert path.stat().st_size > 1_000_000
    request = _queue_request(path, ["jobtables"])
    request["squeue"]["max_bytes"] = 500_000
    answer = collector.collect_queue(request)
    said = answer["squeue"]
    assert said["exit"] != 0 and said["stdout"] == "" and "json" not in said
    assert "squeue --json printed more than 500000 bytes" in said["stderr"]
    assert "comments" in said["stderr"]  # the likely cause named


def test_squeue_output_under_its_cap_reads_as_before(tmp_path: Path) -> None:
    path = _hostile_queue(tmp_path, jobs=40, comment_chars=20_000)
    request = _queue_request(path, ["jobtables"])
    request["squeue"]["max_bytes"] = path.stat().st_size
    answer = collector.collect_queue(request)
    assert answer["squeue"]["exit"] == 0 and len(answer["squeue"]["json"]["jobs"]) == 40
