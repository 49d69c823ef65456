"""What a one-shot command imports, and when (``bot.preload``, ``bot.logs.get_logger``), tried
in child processes: a fresh interpreter is the only place ``sys.modules`` says anything."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from bot.cli import DEMO_RECORDING
from bot.preload import LATER

LATE = ("structlog", "rich", *LATER)
"""Modules the path up to a sweep's first command must not import."""


def python(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter (``argv`` after it), outputs captured."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv],
                          capture_output=True, text=True, timeout=120, check=False)


def loaded_after(code: str, *argv: str) -> list[str]:
    """Which of :data:`LATE` are imported once ``code`` has run (its last stdout line)."""
    done = python(textwrap.dedent(code) + f"\nimport json, sys\nprint(json.dumps([m for m in "
                  f"{LATE!r} if m in sys.modules]))\n", *argv)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


SLURM = 'SlurmCluster(name="s", kind="slurm", host="127.0.0.1", port=9, user="x")'
"""A remote cluster (nothing here connects to it)."""


def test_importing_the_cli_imports_no_judging_rendering_or_structlog() -> None:
    """``import bot.cli`` (so ``--help``) leaves every late module unimported."""
    assert loaded_after("import bot.cli") == []


def test_the_late_modules_are_imported_beside_the_block() -> None:
    """With a remote cluster the block starts before the first import, and every module of
    :data:`LATER` is imported when it ends; structlog is not among them."""
    code = f"""
        import asyncio, sys
        from bot import preload
        from probes.config import SlurmCluster

        async def sweep():
            async with preload.meanwhile([{SLURM}]):
                assert not any(m in sys.modules for m in preload.LATER)
                await asyncio.sleep(0.5)

        asyncio.run(sweep())
    """
    assert loaded_after(code) == [m for m in LATE if m != "structlog"]


def test_an_error_in_the_block_is_raised_as_it_is_and_stops_the_imports() -> None:
    """A block's own error (a job not found) is not wrapped; the imports stop with it."""
    code = f"""
        import asyncio, sys
        from bot import preload
        from bot.errors import JobNotFoundError
        from probes.config import SlurmCluster

        async def job():
            async with preload.meanwhile([{SLURM}]):
                await asyncio.sleep(0)
                raise JobNotFoundError("no job 1")

        try:
            asyncio.run(job())
        except JobNotFoundError:
            pass
        assert "report.render" not in sys.modules
    """
    assert "report.render" not in loaded_after(code)


def test_a_sweep_of_recordings_imports_nothing_meanwhile() -> None:
    """Nothing remote to wait on: the block runs alone."""
    code = f"""
        import asyncio
        from bot import preload
        from probes.config import ReplayCluster, SlurmCluster

        async def sweep():
            clusters = [ReplayCluster(name="r", path={str(DEMO_RECORDING)!r}),
                        {SLURM[:-1]}, active=False)]
            async with preload.meanwhile(clusters):
                await asyncio.sleep(0.5)

        asyncio.run(sweep())
    """
    assert loaded_after(code) == []


def test_a_sweep_that_logs_nothing_never_imports_structlog() -> None:
    """``jobtables demo`` judges and renders (rich), but structlog stays unimported."""
    code = """
        import contextlib, io
        import bot.cli
        with contextlib.redirect_stdout(io.StringIO()):
            assert bot.cli.main(["demo"]) == 0
    """
    assert loaded_after(code) == ["rich", *LATER]


CRASHING = """
    import sys
    import probes.registry

    class CrashingProbe:
        def __init__(self, cluster, **options):
            pass

        async def collect(self):
            raise RuntimeError("probe bug")

        async def aclose(self):
            pass

    sys.modules["crashing"] = sys.modules[__name__]
    probes.registry.BACKENDS["replay"] = "crashing:CrashingProbe"
    import bot.cli
    sys.exit(bot.cli.main(sys.argv[1:]))
"""


def test_a_late_first_log_is_configured_and_goes_to_stderr(tmp_path: Path) -> None:
    """A probe crash logged through a logger made before structlog was imported: structlog
    is configured first (key=value on stderr), the report on stdout says why."""
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "r"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    done = python(CRASHING, "sweep", "--config", str(config), "--format", "json")
    assert done.returncode == 0, done.stderr
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["status"] == "unreachable" and "probe bug" in cluster["detail"]
    first = done.stderr.splitlines()[0]
    assert "[error    ] probe crashed" in first and "cluster=r" in first
    assert "RuntimeError: probe bug" in done.stderr
