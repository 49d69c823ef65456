"""``jobtables job``'s neighbour listing: the user's other runs in the job's workdir, with the
log path squeue's pattern gives each (``probes.slurm.neighbours``)."""

from __future__ import annotations

from probes.models import JobState, SchedulerRecord
from probes.remote.neighbour_listing import neighbour_specs, rows_to_read
from probes.slurm.neighbours import (
    NEIGHBOURS_READ,
    neighbour_request,
    parse_attempts,
    parse_neighbours,
)

NONCE = "n0nce"
W = "/home/u/runs/shared"
RECORD = SchedulerRecord(cluster="c", job_id="500", name="rl-titan", user="u",
                         state=JobState.RUNNING, workdir=W)


def _row(*fields: str) -> str:
    """One record as ``squeue -O`` prints :func:`neighbour_argv`'s format: id, own id, state,
    workdir, ``--output``, nodes, name."""
    assert len(fields) == 7
    return f"<F:{NONCE}>".join(fields) + f"<N:{NONCE}>\n"


def test_other_runs_in_the_workdir_with_their_logs() -> None:
    """Other names in the same workdir are kept, their ``--output`` filled; the job itself,
    its own name's jobs and other workdirs are not."""
    text = "".join((
        _row("500", "500", "RUNNING", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("501", "501", "RUNNING", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("502", "502", "RUNNING", W + "/", f"{W}/%x-%j.out", "vm", "rl-easyr1"),
        _row("503", "503", "RUNNING", "/elsewhere", "/elsewhere/o.out", "vm", "rl-other"),
        _row("504_3", "506", "COMPLETED", W, "rel_%%j_%A_%a_%3a_%j.out", "vm", "grid"),
        _row("505", "505", "RUNNING", W, f"{W}/%b_%j.out", "vm", "weird"),
    ))
    found = {r.job_id: r for r in parse_neighbours(text, NONCE, RECORD)}
    assert sorted(found) == ["502", "504_3", "505"]
    assert found["502"].stdout_path == f"{W}/rl-easyr1-502.out"
    assert found["504_3"].stdout_path == f"{W}/rel_%j_504_3_003_506.out"
    assert found["505"].stdout_path is None  # not a 22.05 token: no path guessed
    assert found["502"].user == "u" and found["502"].state is JobState.RUNNING


def test_a_name_holding_the_markers_of_another_nonce_is_one_name() -> None:
    """The name is the last field and the nonce is the sweep's own: no forged record."""
    name = "x<F:other>y<N:other>\nz"
    found = parse_neighbours(_row("507", "507", "RUNNING", W, f"{W}/a.out", "vm", name),
                             NONCE, RECORD)
    assert [(r.job_id, r.name) for r in found] == [("507", name)]


def test_read_started_ones_with_a_log_running_first_and_at_most_the_cap() -> None:
    """Pending jobs and jobs with no known log are not read; running ones come first."""
    def job(key: str, state: str, path: str | None) -> dict[str, object]:
        return {"id": key, "state": state, "stdout": path}
    jobs = [job("1", "COMPLETED", "/a"), job("2", "PENDING", "/b"),
            job("3", "RUNNING", None), job("4", "RUNNING", "/d")]
    assert [r["id"] for r in rows_to_read(jobs)] == ["4", "1"]
    many = [job(str(n), "RUNNING", f"/l{n}") for n in range(NEIGHBOURS_READ + 5)]
    assert len(rows_to_read(many)) == NEIGHBOURS_READ


def _listing() -> str:
    return "".join((
        _row("500", "500", "RUNNING", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("502", "502", "COMPLETED", W, f"{W}/%x-%j.out", "vm", "rl-easyr1"),
        _row("503", "503", "PENDING", W, f"{W}/%x-%j.out", "", "queued"),
        _row("504_3", "506", "RUNNING", W, "rel_%%j_%A_%a_%3a_%j.out", "vm", "grid"),
        _row("505", "505", "RUNNING", W, f"{W}/%b_%j.out", "vm", "weird"),
    ))


def test_the_collector_reads_the_logs_the_probe_names() -> None:
    """Command 2's collector reads, from the same listing, the logs of the neighbours the
    probe parses (same ids, same paths; running first), with no checkpoint or trial root."""
    asked = neighbour_request(1, NONCE, RECORD)
    ran = [{"exit": 0, "stdout": ""}, {"exit": 0, "stdout": _listing(), "stderr": ""}]
    specs = neighbour_specs({"neighbours": asked}, ran)
    parsed = {r.job_id: r.stdout_path for r in parse_neighbours(_listing(), NONCE, RECORD)}
    assert [s["id"] for s in specs] == ["504_3", "502"]
    assert all(s["stdout"] == parsed[s["id"]] for s in specs)
    assert all(s["checkpoint_roots"] == s["run_checkpoint_roots"] == s["trial_roots"] == []
               for s in specs)
    assert [s["completed"] for s in specs] == [False, True]
    assert {s["user"] for s in specs} == {"u"} and {s["workdir"] for s in specs} == {W}


def test_no_listing_no_neighbour_read() -> None:
    """A listing that failed (or a request without the section) reads no neighbour."""
    asked = neighbour_request(1, NONCE, RECORD)
    failed = [{"exit": 0, "stdout": ""}, {"exit": 1, "stdout": _listing(), "stderr": "no"}]
    assert neighbour_specs({"neighbours": asked}, failed) == []
    assert neighbour_specs({}, [None, {"exit": 0, "stdout": _listing()}]) == []


def _attempts_listing() -> str:
    return "".join((
        _row("480", "480", "TIMEOUT", "/old", "/old/%x-%j.out", "vm", "rl-titan"),
        _row("490", "490", "FAILED", "/elsewhere", "/elsewhere/%x-%j.out", "vm", "rl-titan"),
        _row("495", "495", "CANCELLED", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("496", "496", "PENDING", W, f"{W}/%x-%j.out", "", "rl-titan"),
        _row("497_1", "498", "COMPLETED", W, f"{W}/%A_%a.out", "vm", "rl-titan"),
        _row("499", "499", "COMPLETED", W, f"{W}/%b.out", "vm", "rl-titan"),
        _row("500", "500", "RUNNING", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("501", "501", "COMPLETED", W, f"{W}/%x-%j.out", "vm", "rl-titan"),
        _row("502", "502", "COMPLETED", W, f"{W}/%x-%j.out", "vm", "rl-easyr1"),
    ))


def test_the_run_s_latest_ended_attempts_are_read_from_any_workdir() -> None:
    """The job's own name, ended, submitted before it (a lower id), with a known log, from
    any workdir, the latest two: not the job, a pending copy, an array task, a later job or
    a log squeue's pattern cannot give."""
    found = parse_attempts(_attempts_listing(), NONCE, RECORD)
    assert [(r.job_id, r.stdout_path) for r in found] == [
        ("495", f"{W}/rl-titan-495.out"), ("490", "/elsewhere/rl-titan-490.out")]
    assert found[1].workdir == "/elsewhere" and found[1].state is JobState.FAILED


def test_the_collector_reads_the_attempts_the_probe_names_whatever_the_roots() -> None:
    """Command 2's collector reads the same attempts' logs, after the neighbours, also when
    the neighbours' progress is not read (checkpoint roots of the config's own)."""
    ran = [{"exit": 0, "stdout": ""}, {"exit": 0, "stdout": _attempts_listing(), "stderr": ""}]
    both = neighbour_specs({"neighbours": neighbour_request(1, NONCE, RECORD)}, ran)
    assert [s["id"] for s in both] == ["502", "495", "490"]
    alone = neighbour_specs(
        {"neighbours": neighbour_request(1, NONCE, RECORD, neighbours=False)}, ran)
    assert [(s["id"], s["stdout"]) for s in alone] == [
        (r.job_id, r.stdout_path) for r in parse_attempts(_attempts_listing(), NONCE, RECORD)]
    assert all(s["checkpoint_roots"] == s["trial_roots"] == [] for s in alone)
