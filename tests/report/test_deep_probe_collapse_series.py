"""A deep probe of a collapsed run that dumps no rollouts is no NO-KILL.

Found live (sbatch as jtuser, 7711 rl-skyrl-recs: tests/fixtures/skyrl-rebuilt/
console_v03_collapse.log up to step 30, running): its row read verdict collapse, recommendation
cancel_and_salvage, while `jobtables probe 7711` read NO-KILL, 'nothing to judge: no rollouts
were found (no rollout dump, printed completions or Harbor trials); the row cannot be confirmed
from its rollouts'. The seed's collapse rule (>= 2 signals on one step -> cancel + salvage) is
read from the run's own printed series, which the probe holds (as it judges the row's
dead-rollouts test there): a probe that found nothing else must not answer NO-KILL to a run
its own series shows collapsed. The healthy SkyRL console stays NO-KILL.
"""

from __future__ import annotations

from pathlib import Path

from probes.rollouts import rollout_facts
from report.deep_probe import judge_rollouts

SKYRL = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "skyrl-rebuilt"


def _probe(name: str, stop: str | None = None) -> tuple[str, list[str]]:
    text = (SKYRL / name).read_text(encoding="utf-8", errors="replace")
    if stop is not None:
        text = text[: text.index(stop)]
    result = judge_rollouts(rollout_facts(None, log_text=text, log_path=name))
    return result.verdict, result.reasons


def test_a_collapsed_series_is_a_kill_without_rollouts() -> None:
    verdict, reasons = _probe("console_v03_collapse.log", "Reached max_training_steps")
    assert verdict == "KILL"
    assert any(r.startswith("collapse in the logged series at step 30 (began at step 20): "
                            "grad_norm 6.16 > 1; entropy 0.0621 -42% vs trend 0.107")
               for r in reasons), reasons


def test_a_healthy_series_stays_no_kill() -> None:
    verdict, reasons = _probe("console_v03.log")
    assert verdict == "NO-KILL" and not any("collapse" in r for r in reasons)
