"""The collector's scheduler commands (``probes.remote.scheduler``): independent commands run
at the same time, a marked one only after them and only if they did not print its marker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from probes.remote.scheduler import OUTPUT_CAPPED, run_scheduler
from probes.remote.script import build_collector_script, collector_source


def _sh(script: str) -> dict[str, object]:
    return {"argv": ["env", "sh", "-c", script]}


def test_independent_commands_run_at_the_same_time(tmp_path: Path) -> None:
    # The first waits for a file only the second creates: one after the other, the first
    # would run into its deadline (exit 124) before the second ever started.
    flag = tmp_path / "second-started"
    ran = run_scheduler([
        _sh(f"while [ ! -e '{flag}' ]; do sleep 0.01; done; echo first"),
        _sh(f"touch '{flag}'; echo second"),
    ], deadline_s=10.0)
    assert ran == [{"exit": 0, "stdout": "first\n", "stderr": ""},
                   {"exit": 0, "stdout": "second\n", "stderr": ""}]


def test_a_marked_command_waits_for_the_earlier_ones_and_reads_their_output(
        tmp_path: Path) -> None:
    flag = tmp_path / "slow-done"
    ran = run_scheduler([
        _sh("echo quick"),
        _sh(f"sleep 0.05; touch '{flag}'; echo '<R:abc>'"),
        {**_sh("echo sacct"), "unless": "<R:abc>"},
    ], deadline_s=10.0)
    assert flag.exists()
    assert [r and r["stdout"] for r in ran] == ["quick\n", "<R:abc>\n", None]

    # Not printed: the marked command runs, after the others (it sees their file).
    ran = run_scheduler([
        _sh(f"sleep 0.05; touch '{tmp_path / 'second'}'; echo nothing"),
        {**_sh(f"test -e '{tmp_path / 'second'}' && echo ran-after"), "unless": "<R:abc>"},
        _sh("echo last"),
    ], deadline_s=10.0)
    assert [r and r["stdout"] for r in ran] == ["nothing\n", "ran-after\n", "last\n"]


def test_results_keep_the_order_asked_and_refuse_other_programs() -> None:
    ran = run_scheduler([
        {"argv": ["rm", "-rf", "/nonexistent-jobtables"]},
        _sh("sleep 0.05; echo slow"),
        _sh("echo fast"),
        {"argv": []},
        _sh("echo oops >&2; exit 3"),
    ], deadline_s=10.0)
    assert ran[0] == {"exit": 126, "stdout": "",
                      "stderr": "['rm']: not a scheduler command: not run"}
    assert ran[1] == {"exit": 0, "stdout": "slow\n", "stderr": ""}
    assert ran[2] == {"exit": 0, "stdout": "fast\n", "stderr": ""}
    assert ran[3] is not None and ran[3]["exit"] == 126
    assert ran[4] == {"exit": 3, "stdout": "", "stderr": "oops\n"}


def test_a_command_that_hangs_is_killed_at_the_deadline_and_the_others_stand() -> None:
    ran = run_scheduler([_sh("exec sleep 30"), _sh("echo fine")], deadline_s=0.3)
    assert ran[0] is not None and ran[0]["exit"] == 124
    assert "no answer within 0.3s" in str(ran[0]["stderr"])
    assert ran[1] == {"exit": 0, "stdout": "fine\n", "stderr": ""}


def test_a_program_that_cannot_start_answers_127() -> None:
    ran = run_scheduler([{"argv": ["squeue-not-installed-here"]}], deadline_s=5.0)
    assert ran == [{"exit": 126, "stdout": "",
                    "stderr": "['squeue-not-installed-here']: not a scheduler command: not run"}]
    ran = run_scheduler([{"argv": ["env", "/nonexistent/squeue"]}], deadline_s=5.0)
    assert ran[0] is not None and ran[0]["exit"] == 127


def _answer(script: str) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-"], input=script.encode(), capture_output=True,
                         check=True, timeout=60)
    answer = json.loads(run.stdout)
    assert isinstance(answer, dict)
    answer.pop("now")
    return answer


@pytest.mark.parametrize("commands", [
    [_sh("echo 'JobId=7 JobName=naïve ☃'"), _sh("echo '<R:n1>'; echo err >&2; exit 1"),
     {**_sh("echo sacct"), "unless": "<R:n1>"}],
    [_sh("echo quiet"), {**_sh("echo sacct"), "unless": "<R:n2>"},
     {"argv": ["rm", "-rf", "/nonexistent-jobtables"]}, {"argv": ["env", "/nonexistent/squeue"]}],
])
def test_the_scheduler_only_script_answers_as_the_whole_collector_does(
        commands: list[dict[str, object]]) -> None:
    request = {"jobs": [], "deadline_s": 20.0, "answer_budget": 1 << 20, "scheduler": commands}
    lite = build_collector_script(request)
    assert "def answer_scheduler(" in lite and "def collect(" not in lite
    assert len(lite) * 5 < len(collector_source())
    whole = f"{collector_source()}\n\nmain({json.dumps(request)!r})\n"
    assert _answer(lite) == _answer(whole)
    assert _answer(lite)["scheduler"] == run_scheduler(commands, 8.0)


def test_a_request_with_jobs_or_squeue_still_ships_the_collector() -> None:
    requests: list[dict[str, object]] = [
        {"jobs": [{"id": "1"}], "scheduler": []},
        {"jobs": [], "squeue": {"argv": ["squeue", "--json"]}, "scheduler": []},
        {"jobs": [], "stream": True, "scheduler": []}, {"jobs": []}]
    for request in requests:
        assert build_collector_script(request).startswith(collector_source())


def test_a_command_printing_past_the_cap_is_killed_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler command's output (sacct --json over a busy day, a job with a huge comment)
    was held whole on the login node; past the cap it is killed and its stderr says why, the
    other commands standing."""
    monkeypatch.setattr("probes.remote.scheduler.SCHEDULER_MAX_BYTES", 100_000)
    ran = run_scheduler([_sh("echo warn >&2; head -c 5000000 /dev/zero; echo done"),
                         _sh("yes x | head -c 90000")], deadline_s=20.0)
    assert ran[0] == {"exit": OUTPUT_CAPPED, "stdout": "",
                      "stderr": "env: printed more than 100000 bytes (killed, not read)"}
    assert ran[1] is not None and ran[1]["exit"] == 0 and ran[1]["stdout"] == "x\n" * 45000
