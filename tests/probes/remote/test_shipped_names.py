"""The shipped scripts join several modules' sources in one namespace: no module may redefine
a top-level name another defines differently, or the later one silently replaces the earlier
on the login node while each module alone (as the tests import it) behaves as meant."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from probes.remote import script
from probes.remote.rollouts import collect_rollouts
from probes.remote.script import build_rollouts_script

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "probes" / "remote"
HUGE = "1" + "0" * 400  # a JSON integer beyond float range


def _top_level(module: str) -> dict[str, str]:
    """Each top-level def, class or assignment of ``module`` -> its AST dump."""
    out: dict[str, str] = {}
    for node in ast.parse((HERE / module).read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ast.dump(node)
        elif isinstance(node, ast.Assign):
            out.update((t.id, ast.dump(node)) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = ast.dump(node)
    return out


@pytest.mark.parametrize("modules", [
    pytest.param((*script._SHIPPED_MODULES, "collector.py"), id="collector"),
    pytest.param((*script._ROLLOUT_MODULES, "rollouts.py"), id="rollouts"),
])
def test_no_shipped_module_redefines_another_ones_name(modules: tuple[str, ...]) -> None:
    """Every name defined in two shipped modules of one script is defined the same way."""
    first: dict[str, tuple[str, str]] = {}
    clashes = []
    for module in modules:
        for name, dump in _top_level(module).items():
            if name in first and first[name][1] != dump:
                clashes.append(f"{name}: {first[name][0]} and {module}")
            first.setdefault(name, (module, dump))
    assert clashes == []


def _verl_dump_with_a_huge_score(directory: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "rollout_dumps_rebuilt", ROOT / "tests" / "fixtures" / "generators"
        / "rollout_dumps_rebuilt.py")
    assert spec is not None and spec.loader is not None
    dumps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dumps)
    dumps.write_verl_dump(str(directory), 3, ["q", "q"], ["fine", "odd"], [1.0, 0.25])
    (path,) = directory.glob("*.jsonl")
    text = path.read_text(encoding="utf-8")
    assert "0.25" in text
    path.write_text(text.replace("0.25", HUGE), encoding="utf-8")


def test_a_score_beyond_float_range_reads_as_no_score_in_process_and_shipped(
        tmp_path: Path) -> None:
    """A dump's integer score too big for a float is no score, the same in process and in
    the shipped script (which once raised OverflowError there and lost the whole answer)."""
    _verl_dump_with_a_huge_score(tmp_path / "d")
    request = {"dump_dirs": [str(tmp_path / "d")]}
    local = collect_rollouts(request)["dumps"][0]["steps"][0]["samples"]
    shipped = subprocess.run(["python3", "-"], input=build_rollouts_script(request),
                             capture_output=True, text=True, check=True).stdout
    remote = json.loads(shipped)["dumps"][0]["steps"][0]["samples"]
    assert [s["score"] for s in local] == [1.0, None]
    assert [s["score"] for s in remote] == [1.0, None]
