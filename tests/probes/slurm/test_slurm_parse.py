"""SLURM output parsers on real 22.05.8 captures, 23.11 JSON rebuilt from source, plain squeue."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from probes.errors import CommandError
from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import SQUEUE_JOB_KEYS
from probes.slurm.parse import (
    expand_stdout,
    needs_scontrol,
    parse_squeue_json,
    parse_state,
    record_from_squeue,
    records_from_squeue,
    slurm_release,
)
from probes.slurm.plain import parse_duration, parse_squeue_plain
from probes.slurm.scontrol import (
    merge_scontrol,
    parse_dependency,
    parse_scontrol_all,
    parse_scontrol_line,
)
from tests.probes.slurm.conftest import as_plain_format

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL = FIXTURES / "slurm-22.05.8"
REBUILT = FIXTURES / "slurm-23.11-rebuilt"
IDS = dict(line.split("=", 1) for line in (REAL / "jobs.txt").read_text().split())
NOW_2205 = datetime.fromtimestamp(1796059000, tz=UTC)
NOW_2311 = datetime(2025, 11, 30, 16, 0, tzinfo=UTC)


def _by_id(records: list[SchedulerRecord]) -> dict[str, SchedulerRecord]:
    return {r.job_id: r for r in records}


def _real(suffix: str = "") -> dict[str, SchedulerRecord]:
    """22.05 squeue --json merged with scontrol -o, as the probe does."""
    records = parse_squeue_json((REAL / f"squeue{suffix}.json").read_text(), cluster="c",
                                now=NOW_2205)
    fields = parse_scontrol_all((REAL / f"scontrol{suffix}.txt").read_text())
    return {r.job_id: merge_scontrol(r, fields.get(r.job_id)) for r in records}


@pytest.mark.parametrize(("job", "state"), [
    ("ok", JobState.COMPLETED), ("fail", JobState.FAILED), ("cancel", JobState.CANCELLED),
    ("timeout", JobState.TIMEOUT), ("successor", JobState.RUNNING),
    ("running", JobState.RUNNING),
])
def test_2205_states(job: str, state: JobState) -> None:
    """22.05's string job_state maps onto the contract's states."""
    assert _real()[IDS[job]].state is state


def test_2205_exit_codes_are_decoded_from_the_wait_status() -> None:
    """22.05 squeue prints the raw wait status: 768 is exit 3, 15 is SIGTERM."""
    jobs = _real()
    assert (jobs[IDS["fail"]].exit_code, jobs[IDS["fail"]].exit_signal) == (3, None)
    assert (jobs[IDS["cancel"]].exit_code, jobs[IDS["cancel"]].exit_signal) == (0, 15)
    assert (jobs[IDS["ok"]].exit_code, jobs[IDS["ok"]].exit_signal) == (0, None)


def test_2205_raw_stdout_is_replaced_by_scontrols_expanded_path() -> None:
    """squeue's unexpanded `%x_%j` and empty defaults give way to scontrol's StdOut."""
    raw = _by_id(parse_squeue_json((REAL / "squeue.json").read_text(), cluster="c",
                                   now=NOW_2205))
    assert raw[IDS["ok"]].stdout_path is not None and "%" in raw[IDS["ok"]].stdout_path
    assert raw[IDS["fail"]].stdout_path is None
    jobs = _real()
    workdir = "/home/jobtables/jt-tests/fixture-capture"
    assert jobs[IDS["ok"]].stdout_path == f"{workdir}/logs/fx-ok_{IDS['ok']}.out"
    assert jobs[IDS["fail"]].stdout_path == f"{workdir}/slurm-{IDS['fail']}.out"
    assert jobs[IDS["timeout"]].stdout_path == f"{workdir}/timeout_{IDS['timeout']}.out"
    assert jobs[IDS["ok"]].workdir == workdir


def test_2205_timeout_times() -> None:
    """The --time=1 job: a 60 s limit, start/end set, elapsed about the limit."""
    job = _real()[IDS["timeout"]]
    assert job.time_limit_s == 60 and job.reason == "TimeLimit"
    assert job.start_time is not None and job.end_time is not None
    assert job.elapsed_s is not None and 55 <= job.elapsed_s <= 120


def test_2205_running_job_has_no_end_time() -> None:
    """A RUNNING job's future EndTime (its limit) is not an end."""
    job = _real()[IDS["running"]]
    assert job.end_time is None and job.start_time is not None
    assert job.elapsed_s is not None and job.elapsed_s > 0


def test_2205_array_tasks_get_array_ids() -> None:
    """Array tasks are reported as `<array>_<task>` and matched to their scontrol lines."""
    jobs = _real()
    arr = IDS["array"]
    assert {f"{arr}_1", f"{arr}_2"} <= set(jobs)
    assert jobs[f"{arr}_1"].array_job_id == arr and jobs[f"{arr}_1"].array_task_id == "1"
    assert jobs[f"{arr}_1"].stdout_path is not None
    assert jobs[f"{arr}_1"].stdout_path.endswith(f"slurm-{arr}_1.out")


def test_2205_pending_dependency_from_squeue_and_scontrol() -> None:
    """While the parent runs, both squeue JSON and scontrol name it in the dependency."""
    raw = _by_id(parse_squeue_json((REAL / "squeue_early.json").read_text(), cluster="c",
                                   now=NOW_2205))
    succ = raw[IDS["successor"]]
    assert succ.state is JobState.PENDING and succ.reason == "Dependency"
    assert succ.depends_on == (IDS["timeout"],)
    fields = parse_scontrol_all((REAL / "scontrol_early.txt").read_text())
    assert parse_dependency(fields[IDS["successor"]]["Dependency"]) == (IDS["timeout"],)
    no_dep = succ.model_copy(update={"dependency": None, "depends_on": ()})
    assert merge_scontrol(no_dep, fields[IDS["successor"]]).depends_on == (IDS["timeout"],)


def test_2205_fulfilled_dependency_disappears() -> None:
    """Once the parent ended SLURM drops the edge (chain.py must remember it)."""
    assert _real()[IDS["successor"]].depends_on == ()


def test_2205_plain_format_matches_json() -> None:
    """The `squeue -o` fallback (epoch times) agrees with --json on the core fields."""
    captured = as_plain_format((REAL / "squeue_plain.txt").read_text())
    plain = _by_id(parse_squeue_plain(captured, cluster="c", now=NOW_2205))
    jobs = _real()
    for job_id, rec in plain.items():
        assert (rec.name, rec.user, rec.state, rec.start_time, rec.workdir) == (
            jobs[job_id].name, jobs[job_id].user, jobs[job_id].state, jobs[job_id].start_time,
            jobs[job_id].workdir), job_id
    assert plain[IDS["timeout"]].time_limit_s == 60
    assert plain[IDS["ok"]].stdout_path is None  # squeue -o has no StdOut: scontrol fills it


@pytest.mark.parametrize(("name", "workdir"), [
    ("x|alice|RUNNING|None|1|1|1|1:00|/home/alice|/bin/true||0:01", "/home/mallory"),
    ("plain-name", "/home/mallory/a|b"),
    ("a|b", "/w|x"),
])
def test_plain_pipes_in_free_text_cannot_spoof_the_user(name: str, workdir: str) -> None:
    """Pipes in a job name or workdir (user-chosen) never shift the id, user or state."""
    line = (f"55|mallory|PENDING|Priority|1796050000|N/A|N/A|1:00:00||0:00|{name}|{workdir}"
            "|/bin/run.sh")
    (rec,) = parse_squeue_plain(line, cluster="c", now=NOW_2205)
    assert (rec.job_id, rec.user, rec.state) == ("55", "mallory", JobState.PENDING)
    assert rec.command == "/bin/run.sh"
    assert f"{rec.name}|{rec.workdir}" == f"{name}|{workdir}"
    if "|" not in workdir:
        assert (rec.name, rec.workdir) == (name, workdir)


def test_2205_plain_early_dependency() -> None:
    """The plain format's %E carries the pending dependency too."""
    captured = as_plain_format((REAL / "squeue_plain_early.txt").read_text())
    plain = _by_id(parse_squeue_plain(captured, cluster="c", now=NOW_2205))
    assert plain[IDS["successor"]].depends_on == (IDS["timeout"],)


def _rebuilt() -> dict[str, SchedulerRecord]:
    return _by_id(parse_squeue_json((REBUILT / "squeue.json").read_text(), cluster="a",
                                    now=NOW_2311))


@pytest.mark.parametrize(("job_id", "state"), [
    ("7001", JobState.RUNNING), ("7002", JobState.PENDING), ("7003", JobState.TIMEOUT),
    ("7004", JobState.FAILED), ("7005_3", JobState.RUNNING), ("7006", JobState.COMPLETING),
])
def test_2311_flag_list_states(job_id: str, state: JobState) -> None:
    """23.11's job_state flag lists (COMPLETING wins over COMPLETED) map onto ours."""
    assert _rebuilt()[job_id].state is state


def test_2311_number_objects_and_exit_objects() -> None:
    """{set,infinite,number} times and PROCESS_EXIT_CODE objects are read."""
    jobs = _rebuilt()
    assert jobs["7001"].time_limit_s == 2880 * 60
    assert jobs["7006"].time_limit_s is None  # infinite
    assert jobs["7001"].start_time == datetime.fromtimestamp(1764518400 - 7000, tz=UTC)
    assert jobs["7001"].elapsed_s == 7000
    assert (jobs["7004"].exit_code, jobs["7004"].exit_signal) == (1, None)
    assert (jobs["7003"].exit_code, jobs["7003"].exit_signal) == (0, 15)
    assert jobs["7002"].depends_on == ("7001",) and jobs["7002"].start_time is None
    assert jobs["7001"].stdout_path == "/home/alice/proj/logs/rl-grpo-qwen7b_7001.out"


def test_2311_sacct_shape() -> None:
    """sacct's state block, time block and array block are read; sacct-only jobs appear."""
    jobs = _by_id(parse_squeue_json((REBUILT / "sacct.json").read_text(), cluster="a",
                                    now=NOW_2311))
    assert jobs["6990"].state is JobState.COMPLETED and jobs["6990"].elapsed_s == 30000
    assert jobs["6990"].user == "alice" and jobs["6990"].workdir == "/home/alice/proj"
    assert jobs["7003"].time_limit_s == 1440 * 60 and jobs["7003"].exit_signal == 15


@pytest.mark.parametrize(("raw", "state"), [
    ("RUNNING", JobState.RUNNING), ("CANCELLED by 1001", JobState.CANCELLED),
    (["PENDING", "REQUEUED"], JobState.PENDING), (["RUNNING", "COMPLETING"], JobState.COMPLETING),
    ("BOOT_FAIL", JobState.NODE_FAIL), ("DEADLINE", JobState.TIMEOUT), ("", JobState.UNKNOWN),
    ("WEIRD", JobState.UNKNOWN), (None, JobState.UNKNOWN),
])
def test_parse_state(raw: object, state: JobState) -> None:
    """Every SLURM state spelling maps to one contract state; unknown ones to UNKNOWN."""
    assert parse_state(raw) is state


@pytest.mark.parametrize(("raw", "ids"), [
    ("afterany:123(unfulfilled)", ("123",)),
    ("afterok:1:2,afterany:3+10(unfulfilled)", ("1", "2", "3")),
    ("afterany:5_*(unfulfilled)?afternotok:6(failed)", ("5_*", "6")),
    ("singleton(unfulfilled)", ()),
    ("(null)", ()), ("", ()), (None, ()),
])
def test_parse_dependency(raw: str | None, ids: tuple[str, ...]) -> None:
    """Job ids are read from every dependency element; singleton names none."""
    assert parse_dependency(raw) == ids


@pytest.mark.parametrize(("raw", "seconds"), [
    ("1:00", 60), ("01:02:03", 3723), ("2-00:00:00", 172800), ("365-00:00:00", 31536000),
    ("UNLIMITED", None), ("Partition_Limit", None), ("", None),
])
def test_parse_duration(raw: str, seconds: int | None) -> None:
    """SLURM durations in every printed form."""
    assert parse_duration(raw) == seconds


def test_scontrol_values_with_spaces_and_equals() -> None:
    """WorkDir/StdOut with spaces and TRES values with `=` stay whole."""
    line = ("JobId=9 JobName=a b UserId=u(1) TRES=cpu=1,mem=2G Command=/p/run it.sh "
            "WorkDir=/p/my dir StdOut=/p/my dir/out_9.out Power=")
    fields = parse_scontrol_line(line)
    assert fields["TRES"] == "cpu=1,mem=2G"
    assert fields["WorkDir"] == "/p/my dir"
    assert fields["StdOut"] == "/p/my dir/out_9.out"


def test_invalid_json_is_a_command_error() -> None:
    """Garbage instead of JSON is reported, never guessed at."""
    with pytest.raises(CommandError):
        parse_squeue_json("slurm_load_jobs error: Unable to contact slurm controller", cluster="c",
                          now=NOW_2205)


def test_user_and_id_prefilters_skip_other_jobs() -> None:
    """Other users' squeue jobs and unwanted scontrol lines are skipped before parsing."""
    text = (REAL / "squeue.json").read_text()
    assert parse_squeue_json(text, cluster="c", now=NOW_2205, users=("alice",)) == []
    assert len(parse_squeue_json(text, cluster="c", now=NOW_2205, users=("jobtables",))) == 8
    arr = IDS["array"]
    fields = parse_scontrol_all((REAL / "scontrol.txt").read_text(),
                                wanted={IDS["fail"], f"{arr}_1"})
    assert {IDS["fail"], f"{arr}_1"} <= set(fields)
    assert IDS["ok"] not in fields and f"{arr}_2" not in fields


@pytest.mark.parametrize("suffix", ["", "_early"])
def test_expand_stdout_matches_real_scontrol(suffix: str) -> None:
    """Expanding 22.05's raw --output patterns gives exactly the StdOut scontrol printed."""
    base = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
    now = datetime(2026, 11, 30, tzinfo=UTC)
    records = parse_squeue_json((base / f"squeue{suffix}.json").read_text(), cluster="c", now=now)
    fields = parse_scontrol_all((base / f"scontrol{suffix}.txt").read_text())
    assert records
    for record in records:
        expanded = expand_stdout(record)
        assert expanded.stdout_path == fields[record.job_id]["StdOut"], record.job_id
        assert not needs_scontrol(expanded)


class _ReadKeys(dict[str, Any]):
    """A job object that remembers which keys were read from it."""

    read: set[str]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


@pytest.mark.parametrize("path", [REAL / "squeue.json", REAL / "squeue_early.json",
                                  REBUILT / "squeue.json", REBUILT / "sacct.json"])
def test_records_read_only_the_listed_job_keys(path: Path) -> None:
    """record_from_squeue reads no key outside SQUEUE_JOB_KEYS (the collector trims to them)."""
    read: set[str] = set()
    for raw in json.loads(path.read_text())["jobs"]:
        job = _ReadKeys(raw)
        job.read = read
        assert record_from_squeue("c", job, NOW_2311) is not None
        trimmed = {k: v for k, v in raw.items() if k in SQUEUE_JOB_KEYS}
        assert record_from_squeue("c", trimmed, NOW_2311) == record_from_squeue("c", raw, NOW_2311)
    assert read and read <= set(SQUEUE_JOB_KEYS)


def test_parsed_document_gives_the_same_records_and_release() -> None:
    """records_from_squeue on a parsed document equals parse_squeue_json on its text."""
    text = (REAL / "squeue.json").read_text()
    data = json.loads(text)
    for users in (None, ("jobtables",), ("alice",)):
        assert records_from_squeue(data, cluster="c", now=NOW_2205, users=users) == \
            parse_squeue_json(text, cluster="c", now=NOW_2205, users=users)
    assert slurm_release(data) == "22.05.8"
    assert slurm_release({"meta": {"slurm": {"release": "23.11.4"}}}) == "23.11.4"
    assert slurm_release({"meta": "odd"}) is None and slurm_release([]) is None
    with pytest.raises(CommandError):
        records_from_squeue({"meta": {}}, cluster="c", now=NOW_2205)


def test_a_hetjob_components_scontrol_record_is_found_by_its_sweep_id() -> None:
    """The sweep names a hetjob component ``L+N``: its scontrol record (``JobId=<own>
    HetJobId=L HetJobOffset=N``) is matched by that id too, so a StdOut squeue prints raw
    (``%N``) gets scontrol's expansion (it kept the raw pattern: no log for the component)."""
    from probes.slurm.parse import expand_stdout
    from probes.slurm.probe import SlurmProbe

    line = (REAL / "scontrol.txt").read_text().splitlines()[0]
    own = line.split()[0].removeprefix("JobId=")
    stdout = next(t for t in line.split() if t.startswith("StdOut=")).removeprefix("StdOut=")
    het_line = line.replace(f"JobId={own} ", f"JobId={own} HetJobId=123 HetJobOffset=1 ", 1)
    document = {"jobs": [{"job_id": int(own), "het_job_id": 123, "het_job_offset": 1,
                          "name": "het", "user_name": "jobtables", "job_state": "RUNNING",
                          "start_time": 1796058000, "current_working_directory": "/w",
                          "standard_output": "/w/%N.out"}]}
    (record,) = parse_squeue_json(json.dumps(document), cluster="c", now=NOW_2205)
    assert record.job_id == "123+1"
    merged = SlurmProbe._merged({record.job_id: expand_stdout(record)}, het_line)
    assert merged["123+1"].stdout_path == stdout
