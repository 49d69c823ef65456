"""Paths whose bytes are not UTF-8, read through the CLI on the real SLURM 22.05 over SSH
(``jobtables sweep --format json`` and ``jobtables job ID``).

``sbatch -o $'log\\xff\\xfe_%j.out'`` and a workdir named in Latin-1 (``w\\xe9d``): squeue --json
prints those bytes raw, as scontrol does. The collector decoded them with U+FFFD (a log that
exists read ``log-missing``) and died on a workdir listing that held such a name (every job of
the run ``fetch-failed``). Each job's log must be read where slurmstepd wrote it, its path
shown with ``\\xNN`` escapes, and the output stay valid UTF-8. The module cancels only its own
jobs and removes its directory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh

LINE = "{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.1}"
SUBMIT = r"""set -e
d="$1"; tag="$2"; w="$d/w$(printf '\351')d"; out="$d/x/log$(printf '\377\376')_%j.out"
mkdir -p "$d/x" "$w"
cat > "$d/run.sh" <<'EOF'
#!/bin/sh
[ -n "$MOVE" ] && mv "slurm-$SLURM_JOB_ID.out" "real_$SLURM_JOB_ID.out"
echo "LINE"
sleep 600
EOF
sbatch --parsable -J "sft-u8out-$tag" --chdir "$d/x" -o "$out" "$d/run.sh"
sbatch --parsable -J "sft-u8dir-$tag" --chdir "$w" "$d/run.sh"
sbatch --parsable -J "sft-u8mv-$tag" --chdir "$w" --export=ALL,MOVE=1 "$d/run.sh"
sbatch --parsable -J "sft-u8name$(printf '\377')-$tag" --chdir "$w" -o "$w/n_%x_%j.out" "$d/run.sh"
""".replace("LINE", LINE.replace('"', '\\"'))
"""Four jobs: StdOut with \\xff\\xfe; the default StdOut in a Latin-1 workdir; that log moved
to ``real_<id>.out`` (log-path-mismatch); a name with \\xff filled into ``%x``."""


async def _written(env: SlurmEnv, run_dir: str, bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    count = ""
    while time.monotonic() < deadline:
        count = await _ssh(env, ["sh", "-c", f"cat {run_dir}/x/*.out {run_dir}/w*d/*.out "
                                 "2>/dev/null | grep -c loss || true"])
        if count.strip() == "4":
            return
        await asyncio.sleep(1)
    pytest.fail(f"the jobs did not write their logs within {bound_s}s: {count!r}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[tuple[list[str], str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/u8-{tag}"
    ids: list[str] = []
    try:
        out = asyncio.run(_ssh(slurm_env, ["sh", "-c", SUBMIT, "submit", run_dir, tag]))
        ids = [line.split(";")[0] for line in out.split()]
        assert len(ids) == 4, out
        asyncio.run(_written(slurm_env, run_dir, bound_s=120))
        yield ids, run_dir
    finally:
        if ids:
            asyncio.run(_ssh(slurm_env, ["scancel", *ids]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))



def _expected(run_dir: str, ids: list[str]) -> dict[str, tuple[str, bool]]:
    """job id -> (log_path as shown, whether it is a log-path-mismatch)."""
    w = f"{run_dir}/w\\xe9d"
    return {ids[0]: (f"{run_dir}/x/log\\xff\\xfe_{ids[0]}.out", False),
            ids[1]: (f"{w}/slurm-{ids[1]}.out", False),
            ids[2]: (f"{w}/real_{ids[2]}.out", True),
            ids[3]: (f"{w}/n_sft-u8name\\xff-{run_dir[-6:]}_{ids[3]}.out", False)}


def _check(row: dict[str, Any], path: str, mismatch: bool) -> None:
    assert "log-missing" not in row["flags"] and "fetch-failed" not in row["flags"], row
    assert ("log-path-mismatch" in row["flags"]) is mismatch, row
    assert row["log_path"] == path, row
    assert row["metrics"].get("loss") == pytest.approx(1.5), row


def test_the_sweep_reads_each_log_at_its_exact_bytes(
    slurm_env: SlurmEnv, jobs: tuple[list[str], str], tmp_path: Path,
) -> None:
    """Every job reads its step from the file slurmstepd made; paths show ``\\xNN``; a name
    holding such a byte shows U+FFFD."""
    ids, run_dir = jobs
    report = cli_json(slurm_env.config_toml(tmp_path, recent_hours=1), "sweep")
    rows = {j["job_id"]: j for j in report["jobs"] if j["job_id"] in ids}
    for job_id, (path, mismatch) in _expected(run_dir, ids).items():
        _check(rows[job_id], path, mismatch)
    assert rows[ids[3]]["name"] == f"sft-u8name\ufffd-{run_dir[-6:]}"


def test_job_reads_each_log_at_its_exact_bytes(
    slurm_env: SlurmEnv, jobs: tuple[list[str], str], tmp_path: Path,
) -> None:
    """``jobtables job``: the same logs, the workdir shown escaped, the name with U+FFFD."""
    ids, run_dir = jobs
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    for job_id, (path, mismatch) in _expected(run_dir, ids).items():
        row = cli_json(config, "job", job_id)
        _check(row, path, mismatch)
        assert row["workdir"].startswith(run_dir), row
    assert cli_json(config, "job", ids[3])["name"] == f"sft-u8name\ufffd-{run_dir[-6:]}"
