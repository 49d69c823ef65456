"""The worker pool imports nothing from the directory the bot was started in.

CPython 3.11 starts the forkserver (and multiprocessing's resource tracker) as
``python -c '...'``, so the server's ``sys.path[0]`` is ``''``, the current directory: a bot
started from a shared directory would import a planted ``selectors.py`` (``multiprocessing``
imports ``socket``, which imports ``selectors``) or a planted ``bot/`` package (the preload)
there, as the bot's user. The bot is started the way its console script starts it: a script
outside the current directory (``sys.path[0]`` is the script's folder, never the cwd).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PLANTED = {
    "selectors.py": "selectors",
    "signal.py": "signal",
    "socket.py": "socket",
    "bot/__init__.py": "bot",
}

RUNNER = textwrap.dedent("""
    import asyncio, os, sys
    sys.path.insert(1, {root!r})  # the installed bot, as the console script finds it
    from bot.offload import Offload

    async def main():
        offload = Offload(min_bytes=0)
        try:
            pid = await offload.run(os.getpid, size=1)
            assert pid != os.getpid(), "ran in a thread, not the worker process"
            print("worker", offload.in_process)
        finally:
            await offload.aclose()

    if __name__ == "__main__":  # a worker imports this script as __mp_main__
        asyncio.run(main())
""")


def _plant(where: Path, marker: Path) -> None:
    for name, module in PLANTED.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker / module)!r}, 'w').write('imported')\n"
                        "raise ImportError('planted')\n")


def test_the_worker_pool_imports_nothing_from_the_bots_cwd(tmp_path: Path) -> None:
    shared, marker, scripts = tmp_path / "shared", tmp_path / "marker", tmp_path / "scripts"
    for d in (shared, marker, scripts):
        d.mkdir()
    _plant(shared, marker)
    runner = scripts / "run_bot.py"
    runner.write_text(RUNNER.format(root=str(Path(__file__).resolve().parents[2])))
    done = subprocess.run([sys.executable, str(runner)], check=False, cwd=shared,
                          capture_output=True, text=True, timeout=120)
    assert sorted(p.name for p in marker.iterdir()) == []  # nothing planted was imported
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["worker", "1"]  # the task did run in the worker process
