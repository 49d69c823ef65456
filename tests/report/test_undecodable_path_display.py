"""A path whose bytes are not UTF-8 reaches the report as the probes keep it (``os.fsdecode``'s
lone surrogates, so the login node can open it) and is shown as ``\\xNN`` escapes: the JSON
stays valid UTF-8, the text and the job's facts print, nothing is cut or turned to spaces."""

from __future__ import annotations

import json

from report.cells import shown_json, shown_path
from report.models import JobDetail
from report.render import render_job_detail, render_job_json
from tests.report.factories import facts, healthy_rl, judge, log, points, record

WORKDIR = "/w/w\udce9d"
"""``/w/w\\xe9d`` (Latin-1) as ``os.fsdecode`` gives it."""
ASKED = f"{WORKDIR}/gone_100.out"
READ = f"{WORKDIR}/log\udcff\udcfe_100.out"


def _detail(status: str = "mismatch") -> JobDetail:
    job = facts(record(workdir=WORKDIR, stdout_path=ASKED), points(healthy_rl()),
                log_fetch=log(status, requested_path=ASKED,
                              path=READ if status != "missing" else None))
    return judge(job)


def test_shown_path_escapes_each_undecodable_byte() -> None:
    """Each byte that is not UTF-8 shows as ``\\xNN``; any other text is unchanged."""
    assert shown_path(READ) == "/w/w\\xe9d/log\\xff\\xfe_100.out"
    assert shown_path("/w/ünï/x_1.out") == "/w/ünï/x_1.out"
    assert shown_path("/w/\ud800x") == "/w/\ufffdx"  # not a byte: the replacement character


def test_the_json_log_path_workdir_and_note_are_valid_utf8_and_escaped() -> None:
    """``jobtables job --format json``: it raised UnicodeEncodeError writing the answer (or
    printed bytes that are not UTF-8); now log_path, workdir and the mismatch note read
    ``\\xNN``."""
    detail = _detail()
    text = render_job_json(detail)
    text.encode("utf-8")
    obj = json.loads(text)
    assert "log-path-mismatch" in obj["flags"]
    assert obj["log_path"] == "/w/w\\xe9d/log\\xff\\xfe_100.out"
    assert obj["workdir"] == "/w/w\\xe9d"
    assert "/w/w\\xe9d/gone_100.out" in obj["note"]


def test_the_text_facts_show_the_escaped_paths() -> None:
    """``jobtables job``: the Log line names the file as ``\\xNN``, not with spaces."""
    text = render_job_detail(_detail())
    text.encode("utf-8")
    assert "Log: /w/w\\xe9d/log\\xff\\xfe_100.out (workdir /w/w\\xe9d)" in text


def test_a_missing_log_names_its_stdout_escaped() -> None:
    """``log-missing``'s trend names the StdOut asked for, escaped."""
    text = render_job_json(_detail("missing"))
    obj = json.loads(text)
    assert "log-missing" in obj["flags"] and "gone_100.out" in obj["trend"]
    assert "\\xe9" in obj["trend"]


def test_any_other_cluster_text_holding_such_a_byte_still_gives_valid_json() -> None:
    """A byte that is not UTF-8 in a text the judge does not escape (here a fault's detail,
    as an unreadable tree's path would be) is escaped when the JSON is written."""
    detail = _detail()
    shown = detail.model_copy(
        update={"faults": ("traceback: in /w/w\udce9d/train.py",)})
    obj = json.loads(render_job_json(shown).encode("utf-8"))
    assert obj["faults"] == ["traceback: in /w/w\\xe9d/train.py"]
    assert shown_json('"a\udcffb\ud800"') == '"a\\\\xffb\ufffd"'
