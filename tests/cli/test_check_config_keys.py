"""check-config names the line and the key of each mistake a TOML file can hold, and warns
about files the config names that this machine does not have."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main

ONE = '[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "REC"\n'


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> tuple[int, str, str]:
    path = tmp_path / "jobtables.toml"
    path.write_text(textwrap.dedent(body).replace("REC", str(DEMO_RECORDING)))
    code = main(["check-config", "--config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("body", "where", "says"), [
    ('[[clusters]]\nname = "a"\nkind = "pbs"\n', ":3: clusters.0.kind:", 'kind must be "slurm"'),
    # A NUL reached squeue's argv: a traceback ('probe crashed', local) or a reset SSH session.
    (ONE + 'users = ["alice", "job\\u0000tables"]\n', ":5: clusters.0.users:",
     "'job\\x00tables' is no user name"),
    (ONE + 'users = ["alice,bob"]\n', ":5: clusters.0.users:", "'alice,bob' is no user name"),
    (ONE + 'users = [""]\n', ":5: clusters.0.users:", "'' is no user name"),
    (ONE + 'users = ["-h"]\n', ":5: clusters.0.users:", "'-h' is no user name"),
    # No kind at all said 'clusters.0: Unable to extract tag using discriminator 'kind''.
    ('[[clusters]]\nname = "a"\nhost = "h"\n', ":1: clusters.0.kind:",
     'kind is required: "slurm", "kubernetes" or "replay"'),
    (ONE + '\n[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "REC"\n',
     ":7: clusters.1.name:", "cluster name 'alpha' is used twice"),
    (ONE + 'active = "yes"\n', ":5: clusters.0.active:", "valid boolean"),
    ('[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\nport = "22"\n',
     ":5: clusters.0.port:", "valid integer"),
    ('[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\nport = 70000\n',
     ":5: clusters.0.port:", "less than or equal to 65535"),
    (ONE + "recent_hours = -3\n", ":5: clusters.0.recent_hours:", "greater than or equal to 0"),
    (ONE + 'checkpoint_roots = ["{bogus}/x"]\n', ":5: clusters.0.checkpoint_roots:",
     "unknown placeholder {bogus}"),
    (ONE + 'trial_roots = ["{workdir}/{jobid}"]\n', ":5: clusters.0.trial_roots:",
     "unknown placeholder {jobid}"),
    # A NUL in a root passed check-config; the sweep's collector then stopped at the first job
    # that listed it (os.open refuses it), every later job fetch-failed with the log lost.
    (ONE + 'checkpoint_roots = ["{workdir}/ckpt\\u0000x"]\n', ":5: clusters.0.checkpoint_roots:",
     "a root holds a control character"),
    (ONE + 'trial_roots = ["{workdir}/jobs\\nx"]\n', ":5: clusters.0.trial_roots:",
     "a root holds a control character"),
    ('[metrics.aliases]\n"train/x" = "not_a_metric"\n\n' + ONE, ":2: metrics.aliases.train/x:",
     "'not_a_metric': not a canonical metric name"),
    # an array written as one string: said in TOML's words, not pydantic's "valid tuple"
    ('[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\nclient_keys = "/k"\n',
     ":5: clusters.0.client_keys:", 'expected an array (e.g. ["..."]), got a string'),
    (ONE + 'users = "alice"\n', ":5: clusters.0.users:", "expected an array"),
    # TOML has typed values: a string, or a boolean, where a number belongs is a mistake, not
    # a number (pydantic's lax mode read "24" as 24.0 and true as 1.0).
    (ONE + 'recent_hours = "24"\n', ":5: clusters.0.recent_hours:", "valid number"),
    (ONE + "timeout_s = true\n", ":5: clusters.0.timeout_s:", "valid number"),
    (ONE + 'min_log_lines = "3"\n', ":5: clusters.0.min_log_lines:", "valid integer"),
    ('[thresholds]\nwindow = "10"\n', ":2: thresholds.window:", "valid integer"),
    # Values no sweep can run with: a 0 s budget reads every cluster as unreachable, a
    # negative byte bound or window crashed the sweep (ZeroDivisionError at window = 0).
    (ONE + "timeout_s = 0\n", ":5: clusters.0.timeout_s:", "greater than 0"),
    (ONE + "tail_bytes = -1\n", ":5: clusters.0.tail_bytes:", "greater than 0"),
    (ONE + "min_log_lines = -3\n", ":5: clusters.0.min_log_lines:",
     "greater than or equal to 0"),
    ('[[clusters]]\nname = "k"\nkind = "kubernetes"\ntail_lines = 0\n',
     ":4: clusters.0.tail_lines:", "greater than 0"),
    ('[thresholds]\nwindow = 0\n', ":2: thresholds.window:", "greater than or equal to 1"),
    ('[thresholds]\nmin_window = 0\n', ":2: thresholds.min_window:",
     "greater than or equal to 1"),
    # A bad ablation regex was OK here and a traceback (internal error) in every sweep.
    ('[report]\nablation_patterns = ["zclip", "(spike"]\n', ":2: report.ablation_patterns:",
     "bad regex '(spike'"),
    # The key's own line inside a [clusters.owners] sub-table or a dotted key (the cluster's
    # [[clusters]] line was named).
    (ONE + '\n[clusters.owners]\nbob = "U0BBBBBBBBB"\nalice = "alice"\n',
     ":8: clusters.0.owners.alice:", "'alice' is not a Slack user id"),
    (ONE + '\n[[clusters]]\nname = "b"\nkind = "replay"\npath = "REC"\n'
     '[clusters.owners]\nbob = "C0CHANNEL1"\n', ":11: clusters.1.owners.bob:",
     "'C0CHANNEL1' is not a Slack user id"),
    (ONE + 'owners.alice = "x1"\n', ":5: clusters.0.owners.alice:", "not a Slack user id"),
    (ONE + '\n[clusters.owners]\nbob = 7\n', ":7: clusters.0.owners.bob:", "valid string"),
    # Review of 38a64a5: TOML's inf, nan and huge numbers. recent_hours = inf or 1e9 was OK and
    # every sweep read the SLURM cluster unreachable ("probe error: OverflowError", a traceback
    # on stderr); nan is no number of hours.
    (ONE + "recent_hours = inf\n", ":5: clusters.0.recent_hours:", "finite number"),
    (ONE + "recent_hours = 1e9\n", ":5: clusters.0.recent_hours:", "less than or equal to"),
    (ONE + "recent_hours = nan\n", ":5: clusters.0.recent_hours:", "recent_hours"),
    # The deep probe's read plan and judge: 0 or less read nothing (max_file_bytes = -1: every
    # file empty, 'nothing to judge', NO-KILL) or, sliced from the end, everything
    # (latest_steps = 0 judged every step as the latest).
    ('[deep_probe.plan]\nmax_file_bytes = -1\n', ":2: deep_probe.plan.max_file_bytes:",
     "greater than or equal to 1"),
    ('[deep_probe.plan]\nmax_trials = 0\n', ":2: deep_probe.plan.max_trials:",
     "greater than or equal to 1"),
    ('[deep_probe.plan]\ndeadline_s = nan\n', ":2: deep_probe.plan.deadline_s:",
     "deadline_s"),
    ('[deep_probe.judge]\nlatest_steps = 0\n', ":2: deep_probe.judge.latest_steps:",
     "greater than or equal to 1"),
    ('[deep_probe.judge]\nngram_overlap = -0.5\n', ":2: deep_probe.judge.ngram_overlap:",
     "greater than or equal to 0"),
    # The bot's own sections: inf in sweep_every_minutes or period_hours was OK and the bot's
    # scheduler raised OverflowError (next_tick_at); expire_hours = inf or -1, window_len = 0
    # and cache_seconds = nan were OK too (no TTL Redis takes, an empty window, a cache that
    # is never fresh). Every number in the file is finite and within its bounds.
    ('[slack]\nsweep_every_minutes = inf\n', ":2: slack.sweep_every_minutes:", "finite"),
    ('[slack]\nsweep_every_minutes = 1e300\n', ":2: slack.sweep_every_minutes:",
     "less than or equal to"),
    ('[slack]\ncache_seconds = nan\n', ":2: slack.cache_seconds:", "finite"),
    ('[slack]\ncache_seconds = -1\n', ":2: slack.cache_seconds:", "greater than or equal to 0"),
    ('[digest]\nperiod_hours = inf\n', ":2: digest.period_hours:", "finite"),
    ('[digest]\nperiod_hours = 1e-320\n', ":2: digest.period_hours:", "greater than"),
    ('[redis]\nexpire_hours = inf\n', ":2: redis.expire_hours:", "finite"),
    ('[redis]\nexpire_hours = -1\n', ":2: redis.expire_hours:", "greater than 0"),
    ('[redis]\nwindow_len = 0\n', ":2: redis.window_len:", "greater than or equal to"),
    ('[redis]\nwindow_len = 5\n', ":2: redis.window_len:", "thresholds.window"),
    (ONE + "timeout_s = inf\n", ":5: clusters.0.timeout_s:", "finite"),
    ('[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\nread_timeout_s = 1e30\n',
     ":5: clusters.0.read_timeout_s:", "less than or equal to"),
    ('[thresholds]\ngrad_norm_abs = nan\n', ":2: thresholds.grad_norm_abs:", "finite"),
    ('[thresholds]\npass_rate_min = 10\n', ":2: thresholds.pass_rate_min:",
     "less than or equal to 1"),
    ('[deep_probe.plan]\ndeadline_s = inf\n', ":2: deep_probe.plan.deadline_s:", "finite"),
    ('[deep_probe.judge]\nreward_range = [0.0, nan]\n', ":2: deep_probe.judge.reward_range",
     "finite"),
    # The deep probe's dump dirs take the roots' placeholders (README); an unknown one was OK
    # here and the probe skipped that dir unread, so a typo read nothing and said nothing.
    ('[deep_probe.plan]\nrollout_dirs = ["{workdir}/{run}/rollouts"]\n',
     ":2: deep_probe.plan.rollout_dirs:", "unknown placeholder {run}"),
    ('[deep_probe.plan]\nvalidation_dirs = ["{jobid}/val"]\n',
     ":2: deep_probe.plan.validation_dirs:", "unknown placeholder {jobid}"),
    # A range written high-first was OK and then held every reward outside it: KILL for
    # every run the probe read.
    ('[deep_probe.judge]\nreward_range = [1.0, 0.0]\n', ":2: deep_probe.judge.reward_range:",
     "low bound first"),
])
def test_a_mistake_is_named_by_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            body: str, where: str, says: str) -> None:
    """Each was accepted (OK), or named no line or the wrong one, or named no key."""
    code, out, err = check(tmp_path, capsys, body)
    assert code == 2 and out == ""
    assert where in err and says in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_what_a_config_may_name_still_passes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Placeholders the roots know, a canonical alias target, TOML's own booleans and ints."""
    code, out, err = check(tmp_path, capsys, '[metrics.aliases]\n"my/ent" = "entropy"\n'
                           '"my/pos" = "log_ratio_pos_3"\n\n' + ONE + "active = true\n"
                           'checkpoint_roots = ["{workdir}/ckpt/{name}", "/s/{user}/{job_id}"]\n'
                           "recent_hours = 0\n")
    assert code == 0 and "OK (1 clusters, 1 active)" in out and err == ""
    # a year of ended jobs, and the deep probe's bounds at their smallest, are fine
    code, out, err = check(tmp_path, capsys, ONE + "recent_hours = 8760\n\n[deep_probe.plan]\n"
                           "max_trials = 1\nmax_files = 1\n[deep_probe.judge]\n"
                           "latest_steps = 1\nmissing_steps = 0\n"
                           # the bot's memory as long as the report (else a warning)
                           "[redis]\nexpire_hours = 8760\n")
    assert code == 0 and "OK (1 clusters, 1 active)" in out and err == ""
    # the bot's bounds at their edges: a sweep a minute, a week between sweeps, no cache, one
    # parent message an hour, ten years' expiry, a window just longer than the rule window
    code, out, err = check(tmp_path, capsys, ONE + "timeout_s = 86400\n\n[slack]\n"
                           "sweep_every_minutes = 1\ncache_seconds = 0\n[digest]\n"
                           "period_hours = 1\n[redis]\nexpire_hours = 87600\nwindow_len = 11\n"
                           "[thresholds]\npass_rate_min = 1\n")
    assert code == 0 and "OK (1 clusters, 1 active)" in out and err == ""
    code, out, err = check(tmp_path, capsys, ONE + "[slack]\nsweep_every_minutes = 10080\n")
    assert code == 0, err


def test_the_bot_never_starts_with_an_infinite_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`jobtables bot` reads the file before binding a port: sweep_every_minutes = inf was
    accepted and the scheduler's first next_tick_at raised OverflowError."""
    path = tmp_path / "jobtables.toml"
    path.write_text(ONE.replace("REC", str(DEMO_RECORDING))
                    + "\n[slack]\nsweep_every_minutes = inf\n")
    code = main(["bot", "--config", str(path), "--port", "0"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"{path}:7: slack.sweep_every_minutes:" in err and "finite" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_files_this_machine_lacks_are_warned_about(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A known_hosts, client key or replay path that does not exist: the file is valid (it may
    be checked on another machine), but each is named on stderr (the sweep would report the
    cluster unreachable)."""
    code, out, err = check(tmp_path, capsys, f"""\
        [[clusters]]
        name = "a"
        kind = "slurm"
        host = "h"
        known_hosts = "{tmp_path}/kh"
        client_keys = ["{tmp_path}/key"]

        [[clusters]]
        name = "b"
        kind = "replay"
        path = "{tmp_path}/nowhere"
        """)
    assert code == 0 and "OK (2 clusters, 2 active)" in out
    assert f"cluster 'a': known_hosts {tmp_path}/kh does not exist" in err
    assert f"cluster 'a': client key {tmp_path}/key does not exist" in err
    assert f"cluster 'b': replay path {tmp_path}/nowhere does not exist" in err


def test_a_byte_order_mark_is_no_mistake(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A file saved with a UTF-8 byte-order mark (Windows editors) was 'Invalid statement (at
    line 1, column 1)' on a line that looks right; it reads as the same file without one, and
    a mistake in it is still named by its own line."""
    path = tmp_path / "jobtables.toml"
    path.write_bytes(b"\xef\xbb\xbf" + ONE.replace("REC", str(DEMO_RECORDING)).encode())
    assert main(["check-config", "--config", str(path)]) == 0
    assert "OK (1 clusters, 1 active)" in capsys.readouterr().out
    path.write_bytes(b"\xef\xbb\xbf" + (ONE + 'active = "yes"\n').encode())
    assert main(["check-config", "--config", str(path)]) == 2
    assert ":5: clusters.0.active:" in capsys.readouterr().err
