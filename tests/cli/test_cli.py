"""The `jobtables` command line against the bundled recording and replay configs (CONTRACT §1)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from rich.cells import cell_len

from bot.cli import DEMO_RECORDING, main

JOB_KEYS = {
    "cluster", "job_id", "name", "user", "bucket", "state", "elapsed_s", "step", "total_steps",
    "banked_step", "metrics", "flags", "verdict", "trend", "successor", "log_path",
    "recommendation",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def demo_json(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    code, out, _ = run(capsys, "demo", "--format", "json")
    assert code == 0
    return {j["job_id"]: j for j in json.loads(out)["jobs"]}


def replay_config(tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "jobtables.toml"
    body = f'[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n'
    path.write_text(body + "\n".join(extra))
    return path


def test_demo_text_has_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo prints every bucket's table, the grid rollup and the buffer table."""
    code, out, err = run(capsys, "demo")
    assert code == 0 and err == ""
    for title in ("\nRL\n", "\nSFT\n", "SFT grid", "\nDatagen\n", "\nEval\n", "\nCatch-all\n",
                  "\nFilling buffer\n"):
        assert title in out
    assert "┌" in out and "└" in out and "COLLAPSE" in out and "DEAD ENGINE" in out


def test_demo_json_tells_the_stories(capsys: pytest.CaptureFixture[str]) -> None:
    """Collapse, chain restart, crash, path mismatch, dead engine, stall and bring-up all read."""
    jobs = demo_json(capsys)
    assert all(set(j) == JOB_KEYS for j in jobs.values())
    assert jobs["41001"]["verdict"] == "collapse" and "collapse" in jobs["41001"]["flags"]
    assert jobs["41001"]["recommendation"]["action"] == "cancel_and_salvage"  # type: ignore[index]
    assert jobs["41002"]["verdict"] == "healthy"
    assert jobs["40880"]["state"] == "TIMEOUT" and jobs["40880"]["successor"] == "41120"
    assert "chain-restart" in jobs["40880"]["flags"] and jobs["40880"]["verdict"] == "restarting"
    assert jobs["40950"]["verdict"] == "failed" and "child-failed" in jobs["40950"]["flags"]
    assert "shard 7 is corrupt" in str(jobs["40950"]["trend"])
    assert "log-path-mismatch" in jobs["41011"]["flags"]
    assert str(jobs["41011"]["log_path"]).endswith("/train_41011.out")
    assert "dead-engine" in jobs["41060"]["flags"]
    assert "stall" in jobs["41070"]["flags"]
    assert "buffer-filling" in jobs["41004"]["flags"]
    assert jobs["41001"]["banked_step"] == 20
    assert "deep-probe" in jobs["41130"]["flags"]  # a first launch, 4 steps in


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_every_line_fits_the_width(capsys: pytest.CaptureFixture[str], width: int) -> None:
    """No line of the demo report is wider than --width."""
    code, out, _ = run(capsys, "demo", "--width", str(width))
    assert code == 0
    assert max(cell_len(line) for line in out.splitlines()) <= width


def test_slack_format_stays_within_limits(capsys: pytest.CaptureFixture[str]) -> None:
    """--format slack prints messages whose code blocks stay within Slack's section limit."""
    code, out, _ = run(capsys, "demo", "--format", "slack")
    messages = json.loads(out)
    assert code == 0 and messages
    for message in messages:
        assert len(message["blocks"]) <= 50
        for block in message["blocks"]:
            assert len(block["text"]["text"]) <= 3000


def test_sweep_with_replay_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`sweep --config` works on any replay cluster; --cluster selects it."""
    config = replay_config(tmp_path)
    code, out, _ = run(capsys, "sweep", "--config", str(config), "--cluster", "alpha",
                       "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["clusters"][0]["status"] == "ok" and len(data["jobs"]) == 19


def test_unreachable_cluster_is_reported_not_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """A broken cluster is `unreachable` with its reason; the others still report; exit 0."""
    config = replay_config(tmp_path, f'[[clusters]]\nname = "gone"\nkind = "replay"\n'
                                     f'path = "{tmp_path / "nowhere"}"\n'
                                     '[[clusters]]\nname = "off"\nkind = "replay"\n'
                                     'path = "/x"\nactive = false\n')
    code, out, _ = run(capsys, "sweep", "--config", str(config), "--format", "json")
    status = {c["name"]: (c["status"], c["detail"]) for c in json.loads(out)["clusters"]}
    assert code == 0
    assert status["alpha"][0] == "ok" and status["off"][0] == "inactive"
    assert status["gone"][0] == "unreachable" and "no such recording" in status["gone"][1]


def test_a_job_on_an_unreachable_cluster_names_why_it_was_not_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """`job ID --cluster X` where X did not answer (no recording, a closed port, a wrong host
    key): not "no job ID", but which cluster could not be asked and why, reported (exit 0, as
    the sweep reports it), in JSON as the report object with that cluster's status."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = replay_config(tmp_path, f'[[clusters]]\nname = "gone"\nkind = "replay"\n'
                                     f'path = "{tmp_path / "nowhere"}"\n'
                                     '[[clusters]]\nname = "off"\nkind = "replay"\n'
                                     'path = "/x"\nactive = false\n'
                                     '[[clusters]]\nname = "shut"\nkind = "slurm"\n'
                                     f'host = "127.0.0.1"\nport = {port}\n'
                                     f'known_hosts = "{known}"\nconnect_timeout_s = 5\n')
    code, out, err = run(capsys, "job", "41001", "--cluster", "gone", "--config", str(config))
    assert (code, err) == (0, "")  # CONTRACT §1: an unreachable cluster is reported (was 2)
    assert out.startswith("gone:41001: not read: cluster 'gone' is unreachable (")
    assert "no such recording" in out and out.count("\n") == 1
    code, out, err = run(capsys, "job", "shut:41001", "--config", str(config), "--format",
                         "json")
    assert (code, err) == (0, "")
    [shut] = json.loads(out)["clusters"]
    assert (shut["name"], shut["status"]) == ("shut", "unreachable") and str(port) in shut["detail"]
    assert json.loads(out)["jobs"] == []
    code, out, _ = run(capsys, "job", "alpha:41001", "--config", str(config))
    assert code == 0 and "rl-grpo-qwen7b-shaped" in out
    code, _, err = run(capsys, "job", "41999", "--cluster", "alpha", "--config", str(config))
    assert code == 2 and "no job 41999 on cluster 'alpha' in the current report" in err


def test_job_in_depth(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`job CLUSTER:ID` shows the row, history, signals and recommendation."""
    config = replay_config(tmp_path)
    code, out, _ = run(capsys, "job", "alpha:41001", "--config", str(config))
    assert code == 0
    assert "rl-grpo-qwen7b-shaped" in out and "cancel" in out.lower()
    code, out, _ = run(capsys, "job", "41001", "--config", str(config), "--format", "json")
    detail = json.loads(out)
    assert code == 0 and detail["job_id"] == "41001" and detail["history"]


def test_job_format_slack_is_what_slash_job_posts(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`job ID --format slack` prints Slack messages (text and blocks, as `/job` answers),
    with a hostile job name's mentions escaped and its control characters gone; it printed
    the plain-text detail before, `<!channel>` and all."""
    recording = tmp_path / "rec"
    shutil.copytree(DEMO_RECORDING, recording)
    queue = json.loads((recording / "squeue.json").read_text())
    (job,) = [j for j in queue["jobs"] if j["job_id"] == 41001]
    job["name"] += "<!channel> <@U0BOSS> \x1b[2J\u202e```"
    (recording / "squeue.json").write_text(json.dumps(queue))
    config = tmp_path / "hostile.toml"
    config.write_text(f'[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "{recording}"\n')
    code, out, _ = run(capsys, "job", "alpha:41001", "--config", str(config), "--format", "slack")
    messages = json.loads(out)
    assert code == 0 and messages and all(m["blocks"] for m in messages)
    assert messages[0]["text"].startswith("alpha:41001: ")
    shown = json.dumps(messages, ensure_ascii=False)
    assert "rl-grpo-qwen7b-shaped" in shown and "&lt;!channel&gt;" in shown
    assert "<!channel>" not in shown and "<@U0BOSS>" not in shown
    texts = [m["text"] for m in messages] + [
        b["text"]["text"] for m in messages for b in m["blocks"] if "text" in b]
    assert not [ch for text in texts for ch in text if ch != "\n" and not ch.isprintable()]


@pytest.mark.parametrize("bad", ["1;touch /tmp/jt-x", "$(id)", "`id`", "1\n2", "--help", "../1"])
def test_bad_job_id_runs_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: str,
) -> None:
    """An id that is not a plain job id is one stderr line and exit 2; no probe runs."""
    config = tmp_path / "missing.toml"  # never read: the id is rejected first
    code, out, err = run(capsys, "job", "--config", str(config), "--", bad)
    assert code == 2 and out == ""
    assert err.startswith("jobtables: ") and "Traceback" not in err and err.count("\n") == 1
    assert not Path("/tmp/jt-x").exists()


def test_unknown_job_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A well-formed id that names no job is exit 2 with a one-line reason."""
    code, _, err = run(capsys, "job", "999999", "--config", str(replay_config(tmp_path)))
    assert code == 2 and "no job 999999" in err


def test_check_config_names_line_and_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """check-config says exactly what is wrong, with the line and the key."""
    path = tmp_path / "bad.toml"
    path.write_text(textwrap.dedent("""\
        [[clusters]]
        name = "a"
        kind = "slurm"
        host = "login"
        prot = 22

        [slack]
        sweep_every_minutes = -5
    """))
    code, out, err = run(capsys, "check-config", "--config", str(path))
    assert code == 2 and out == ""
    assert f"{path}:5: clusters.0.prot: unknown key" in err
    assert f"{path}:8: slack.sweep_every_minutes" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[[clusters]]\nname = "a"\nkind = "lsf"\n', 'kind must be "slurm"'),
        ('[[clusters]]\nname = "a"\nkind = "slurm"\n', "set exactly one of host"),
        ('[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\nbenign_patterns = ["(x"]\n',
         "bad regex"),
        ("[[clusters]\n", "Expected"),
        ('[buckets]\nrl = ["(unclosed"]\n', "bad regex"),
    ],
)
def test_check_config_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, expected: str,
) -> None:
    """Each kind of config mistake is one clear line and exit 2."""
    path = tmp_path / "c.toml"
    path.write_text(body)
    code, _, err = run(capsys, "check-config", "--config", str(path))
    assert code == 2 and expected in err and "Traceback" not in err


def test_check_config_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A valid config is confirmed with its cluster count."""
    code, out, _ = run(capsys, "check-config", "--config", str(replay_config(tmp_path)))
    assert code == 0 and "OK (1 clusters, 1 active)" in out


def test_config_from_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--config defaults to $JOBTABLES_CONFIG, then ./jobtables.toml."""
    monkeypatch.setenv("JOBTABLES_CONFIG", str(replay_config(tmp_path)))
    assert run(capsys, "check-config")[0] == 0
    monkeypatch.delenv("JOBTABLES_CONFIG")
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "check-config")[0] == 0
    (tmp_path / "jobtables.toml").unlink()
    code, _, err = run(capsys, "check-config")
    assert code == 2 and "no such config file" in err


def test_recording_copy_replays_identically(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """A recording moved elsewhere (a bug report) replays to the same report."""
    copy = tmp_path / "bug-1234"
    shutil.copytree(DEMO_RECORDING, copy)
    config = tmp_path / "c.toml"
    config.write_text(f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{copy}"\n')
    _, moved, _ = run(capsys, "sweep", "--config", str(config), "--format", "json")
    _, demo, _ = run(capsys, "demo", "--format", "json")
    assert json.loads(moved)["jobs"] == json.loads(demo)["jobs"]


def closed_port_cluster(tmp_path: Path) -> tuple[Path, int]:
    """A config whose one SLURM cluster ``alpha`` is at a closed loopback port, and that port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "alpha"\nkind = "slurm"\nhost = "127.0.0.1"\n'
                      f'port = {port}\nknown_hosts = "{known}"\nconnect_timeout_s = 5\n')
    return config, port


def test_record_of_an_unreachable_cluster_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """`record` against a closed port: one stderr line naming host:port, exit 1, nothing written."""
    config, port = closed_port_cluster(tmp_path)
    dest = tmp_path / "rec"
    code, out, err = run(capsys, "record", "--cluster", "alpha", str(dest), "--config",
                         str(config))
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"jobtables: cannot record 'alpha': 127.0.0.1:{port}: connection refused"]
    assert not dest.exists()


@pytest.mark.parametrize("kind", ["file", "other files", "under a file"])
def test_record_into_a_dir_it_refuses_is_bad_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str,
) -> None:
    """`record` into a DIR that is a file, or a directory of other files: the argument is
    wrong, not the cluster: exit 2 and one line, before anything connects (the port here is
    closed). It was exit 1, 'cannot record', the code of a cluster that could not be read."""
    config, _ = closed_port_cluster(tmp_path)
    dest = tmp_path / "dest"
    if kind == "file":
        dest.write_text("notes\n")
    elif kind == "under a file":  # no directory can be made there: it was exit 1 after the
        (tmp_path / "notes.txt").write_text("mine\n")  # sweep, 'cannot record' the cluster
        dest = tmp_path / "notes.txt" / "rec"
    else:
        dest.mkdir()
        (dest / "notes.txt").write_text("mine\n")
    code, out, err = run(capsys, "record", "--cluster", "alpha", str(dest), "--config",
                         str(config))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and str(dest) in err
    assert "connection refused" not in err


def test_probe_of_an_unreachable_cluster_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """`probe` against a closed port: CONTRACT §1, an unreachable cluster is reported, not an
    error: exit 0, the answer on stdout naming the job, the cluster and why (no verdict), no
    traceback; in JSON the contract's report object with the cluster ``unreachable`` and its
    detail, no job. It was exit 1, the contract's code for an internal error, with nothing on
    stdout."""
    config, port = closed_port_cluster(tmp_path)
    code, out, err = run(capsys, "probe", "alpha:41001", "--config", str(config))
    assert (code, err) == (0, "")
    assert out.strip().splitlines() == [
        f"alpha:41001: no deep probe verdict: cluster 'alpha' is unreachable "
        f"(127.0.0.1:{port}: connection refused)"]
    code, out, err = run(capsys, "probe", "alpha:41001", "--config", str(config), "--format",
                         "json")
    assert (code, err) == (0, "")
    answer = json.loads(out)
    assert answer["clusters"] == [{"name": "alpha", "kind": "slurm", "status": "unreachable",
                                   "detail": f"127.0.0.1:{port}: connection refused"}]
    assert answer["jobs"] == [] and answer["generated_at"].endswith("Z")


def test_job_cluster_disagreeing_with_cluster_option_is_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """`job beta:41001 --cluster alpha` is exit 2 with one line; agreeing ones are fine."""
    config = str(replay_config(tmp_path))
    code, out, err = run(capsys, "job", "beta:41001", "--cluster", "alpha", "--config", config)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "'beta'" in err and "'alpha'" in err and "Traceback" not in err
    code, out, _ = run(capsys, "job", "alpha:41001", "--cluster", "alpha", "--config", config)
    assert code == 0 and "rl-grpo-qwen7b-shaped" in out


@pytest.mark.parametrize("command", [["demo"], ["sweep"], ["job", "41001"], ["probe", "41001"]])
@pytest.mark.parametrize("width", ["-5", "0", "20", "401", "wide"])
def test_a_width_outside_the_config_s_bounds_is_bad_usage(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str],
        width: str) -> None:
    """``--width`` takes what ``[report] width`` takes (40-400 columns): anything else is bad
    usage, exit 2 and argparse's one error line, before any config is read or cluster asked
    (a negative width was an internal error with a traceback)."""
    config = replay_config(tmp_path)
    extra = [] if command == ["demo"] else ["--config", str(config)]
    code, out, err = run(capsys, *command, *extra, f"--width={width}")
    assert code == 2 and out == ""
    assert "argument --width:" in err.splitlines()[-1] and "Traceback" not in err


@pytest.mark.parametrize("port", ["-1", "65536", "70000", "http"])
def test_a_port_no_socket_can_bind_is_bad_usage(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path, port: str) -> None:
    """``bot --port 70000`` (or -1) was an internal error, exit 1, with bind()'s
    OverflowError traceback once the bot had started: bad usage is exit 2 and one line, before
    the environment or the config is read."""
    code, out, err = run(capsys, "bot", "--config", str(replay_config(tmp_path)),
                         f"--port={port}")
    assert code == 2 and out == ""
    assert "argument --port:" in err.splitlines()[-1] and "Traceback" not in err


def test_a_name_asked_of_a_slurm_cluster_is_no_unreachable_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """`job abc` (a Kubernetes-style name) on a SLURM cluster: that cluster cannot hold it,
    which is said as such; it read "cluster 'shut' is unreachable ('abc' is not a SLURM job
    id ...)" of a cluster never asked. Nothing connects (the port is closed anyway)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = replay_config(tmp_path, '[[clusters]]\nname = "shut"\nkind = "slurm"\n'
                                     f'host = "127.0.0.1"\nport = {port}\n'
                                     f'known_hosts = "{known}"\nconnect_timeout_s = 5\n')
    code, out, err = run(capsys, "job", "abc", "--cluster", "shut", "--config", str(config))
    assert code == 2 and out == ""
    assert err == ("jobtables: job abc on cluster 'shut' not found: cluster 'shut' cannot hold "
                   "it ('abc' is not a SLURM job id (digits, optionally _N or +N))\n")
    code, _, err = run(capsys, "job", "abc", "--config", str(config))
    assert code == 2 and "unreachable" not in err
    assert "cluster 'shut' cannot hold it" in err and "not on 'alpha'" in err
