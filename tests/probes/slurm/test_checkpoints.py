"""Checkpoint roots, step names and banked steps (layouts: research/formats.md §1.4, §2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.slurm.checkpoints import (
    build_listing,
    expand_roots,
    marker_step,
    read_checkpoints_local,
    step_of,
    steps_from_names,
)


@pytest.mark.parametrize(
    ("templates", "workdir", "user", "expected"),
    [
        (["{workdir}/checkpoints"], "/home/a/proj", "a", ["/home/a/proj/checkpoints"]),
        (["{workdir}/checkpoints"], "/home/a/proj/", "a", ["/home/a/proj/checkpoints"]),
        (["{workdir}/checkpoints"], None, "a", []),
        (["/scratch/{user}/{name}"], None, "a", ["/scratch/a/rl-grpo"]),
        (["/scratch/{user}/{name}"], "/w", None, []),
        (["/ckpt/{job_id}", "/ckpt/{job_id}/"], "/w", "a", ["/ckpt/123"]),
        (["/ckpt/{unknown}", "/ckpt/{", "/ckpt/{0}"], "/w", "a", []),
        (["/fixed/path"], None, None, ["/fixed/path"]),
    ],
)
def test_expand_roots(
    templates: list[str], workdir: str | None, user: str | None, expected: list[str]
) -> None:
    """Placeholders are filled; templates needing a missing value or unknown field are skipped."""
    got = expand_roots(templates, workdir=workdir, name="rl-grpo", job_id="123", user=user)
    assert got == expected


def test_expand_roots_never_reformats_values() -> None:
    """A value that contains braces is inserted as-is, not expanded again."""
    got = expand_roots(["{workdir}/c"], workdir="/w/{user}", name="n", job_id="1", user="a")
    assert got == ["/w/{user}/c"]


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("global_step_10", 10),
        ("global_step1000", 1000),
        ("checkpoint-500", 500),
        ("step_7", 7),
        ("iter_0001000", 1000),
        ("global_step_12.tmp", None),
        ("checkpoint-5-tmp", None),
        ("tmp-checkpoint-5", None),
        ("global_step_", None),
        ("latest_ckpt_global_step.txt", None),
        ("exports", None),
        ("checkpoint-1" + "0" * 20, None),
    ],
)
def test_step_of(name: str, step: int | None) -> None:
    """Only finished checkpoint directory names carry a step."""
    assert step_of(name) == step


def test_steps_from_names_sorted_distinct() -> None:
    """Steps come back sorted and de-duplicated across naming schemes."""
    names = ["global_step_20", "checkpoint-10", "global_step_10", "data.pt", "iter_0000030"]
    assert steps_from_names(names) == [10, 20, 30]


@pytest.mark.parametrize(
    ("text", "step"),
    [("40", 40), ("40\n", 40), (" global_step_40 ", 40), ("", None), ("x40", None), (None, None)],
)
def test_marker_step(text: str | None, step: int | None) -> None:
    """A marker file holds just the integer (SkyRL, verl); anything else is ignored."""
    assert marker_step(text) == step


def test_build_listing_across_roots_and_exports() -> None:
    """Steps from every root are unioned; exports are kept apart."""
    listing = build_listing(
        {"/w/ckpts": ["global_step_10", "global_step_20"], "/s/a/run": ["global_step_30"]},
        export_listings={"/w/ckpts": ["global_step_20", "dumped_evals"]},
    )
    assert listing.roots == ("/w/ckpts", "/s/a/run")
    assert listing.steps == (10, 20, 30)
    assert listing.export_steps == (20,)
    assert listing.banked_step == 30


def test_step_above_marker_is_a_save_in_flight() -> None:
    """A step directory above its root's latest marker is not banked yet."""
    listing = build_listing(
        {"/w/ckpts": ["global_step_10", "global_step_20", "latest_ckpt_global_step.txt"]},
        latest_markers={"/w/ckpts": "10\n"},
    )
    assert listing.banked_step == 10


def test_unreadable_marker_does_not_hide_steps() -> None:
    """A marker that is not an integer is ignored rather than trusted."""
    listing = build_listing({"/r": ["global_step_20"]}, latest_markers={"/r": "garbage"})
    assert listing.banked_step == 20


def test_empty_listing_has_no_banked_step() -> None:
    """No step directories means no banked step, never zero."""
    assert build_listing({"/r": ["README.md"]}).banked_step is None


def _tree(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).mkdir(parents=True)


def test_read_checkpoints_local_skyrl_layout(tmp_path: Path) -> None:
    """SkyRL layout: step dirs, an atomic marker, exports beside the checkpoints."""
    ckpts = tmp_path / "ckpts"
    _tree(ckpts, ["global_step_10", "global_step_20", "global_step_30"])
    (ckpts / "global_step_10" / "policy").mkdir()
    (ckpts / "latest_ckpt_global_step.txt").write_text("20")
    _tree(tmp_path / "exports", ["global_step_20", "dumped_data"])
    listing = read_checkpoints_local([str(ckpts), str(tmp_path / "missing")])
    assert listing.roots == (str(ckpts),)
    assert listing.steps == (10, 20)
    assert listing.export_steps == (20,)


def test_read_checkpoints_local_nested_exports_and_hf(tmp_path: Path) -> None:
    """HF checkpoint-N dirs and an exports/ child are found, two plain levels down too;
    deeper levels are not read."""
    out = tmp_path / "output"
    _tree(out, ["checkpoint-100", "checkpoint-200-tmp", "run/a/checkpoint-150",
                "run/a/b/checkpoint-999"])
    _tree(out / "exports", ["global_step_200"])
    listing = read_checkpoints_local([str(out)])
    assert listing.steps == (100, 150)
    assert listing.export_steps == (200,)


def test_read_checkpoints_local_all_missing(tmp_path: Path) -> None:
    """Roots that do not exist give an empty listing, not an error."""
    listing = read_checkpoints_local([str(tmp_path / "nope"), "/definitely/not/here"])
    assert (listing.roots, listing.steps, listing.banked_step) == ((), (), None)
