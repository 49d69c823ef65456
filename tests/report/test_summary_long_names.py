"""The sweep's summary lines shorten a long job name; names stay recognisable and distinct.

The period's parent message (and ``--format slack``'s header) names the jobs needing a human
in one line per bucket. A job name may be 150 characters (sweep configs encode the whole
recipe in it), and each of up to three names per verdict was repeated in full: one bucket
line ran past 500 characters and wrapped into a paragraph. Now a long name keeps its start and
its end (where runs of one recipe differ: the seed, the learning rate) around an ellipsis,
at most :data:`report.sweep_summary.SUMMARY_NAME_CELLS` cells; two names that would shorten
alike keep more, until they differ.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.cells import cell_len

from probes.models import JobState
from report.models import ClusterReport, Report
from report.sweep_summary import SUMMARY_NAME_CELLS, summary_lines
from tests.report.factories import report_job

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
RECIPE = "rl-grpo-qwen2.5-32b-instruct-dapo-math17k-" + "-".join(
    f"opt{i}" for i in range(18)) + "-lr1e-6-kl0.001-ent0-clip0.28"
LONG_A = (RECIPE + "-seed1")[:145] + "-arm1"
LONG_B = (RECIPE + "-seed1")[:145] + "-arm2"


def _line(*names: str, verdict: str = "collapse", clusters: tuple[str, ...] = ("alpha",)
          ) -> str:
    jobs = [report_job(name, "rl", cluster=clusters[i % len(clusters)], job_id=str(i),
                       verdict=verdict, state=JobState.RUNNING)
            for i, name in enumerate(names)]
    report = Report(generated_at=NOW, jobs=jobs, clusters=[
        ClusterReport(name=c, kind="slurm", status="ok", detail=None) for c in clusters])
    (line,) = summary_lines(report)
    return line


def _named(line: str) -> list[str]:
    return line.split("(", 1)[1].rsplit(")", 1)[0].split(", ")


def test_a_150_character_name_is_shortened_keeping_its_start_and_end() -> None:
    assert len(LONG_A) == 150
    line = _line(LONG_A)
    (shown,) = _named(line)
    assert cell_len(shown) <= SUMMARY_NAME_CELLS and "…" in shown
    assert shown.startswith("rl-grpo-qwen2.5") and shown.endswith("-arm1")
    assert len(line) < 90, line


def test_two_long_names_alike_but_in_the_middle_stay_distinct() -> None:
    """Shortened alike they would read as one job twice: each keeps more until they differ."""
    early_a = "rl-grpo-" + "a" * 60 + "-X-" + "b" * 80
    early_b = "rl-grpo-" + "a" * 60 + "-Y-" + "b" * 80
    shown = _named(_line(early_a, early_b))
    assert len(set(shown)) == 2, shown
    assert {"X", "Y"} <= {c for name in shown for c in name}
    assert all(len(name) < len(early_a) for name in shown), shown  # still shortened


def test_names_that_differ_at_the_end_need_no_more_than_the_limit() -> None:
    shown = _named(_line(LONG_A, LONG_B))
    assert len(set(shown)) == 2 and all(cell_len(n) <= SUMMARY_NAME_CELLS for n in shown)


def test_short_names_are_shown_whole() -> None:
    assert _line("rl-a", "rl-b") == "RL: 2 jobs · 2 COLLAPSE (rl-a, rl-b)"


def test_a_wide_name_is_cut_between_graphemes_by_cells() -> None:
    """Emoji and CJK are two cells each, and a flag is two code points: never split."""
    name = "rl-🇯🇵-" + "実験" * 40 + "-👩‍🔬-end"
    (shown,) = _named(_line(name))
    assert cell_len(shown) <= SUMMARY_NAME_CELLS
    assert shown.startswith("rl-🇯🇵-") and shown.endswith("-👩‍🔬-end")


def test_with_two_clusters_the_cluster_stays_whole() -> None:
    shown = _named(_line(LONG_A, "rl-b", clusters=("alpha", "beta")))
    assert shown[0].startswith("alpha/rl-grpo") and shown[0].endswith("-arm1")
    assert shown[1] == "beta/rl-b"
