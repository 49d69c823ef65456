"""Deep-probe judgement: every check fires on its pathology and stays silent on a healthy run.

Sources: real TRL 1.16 GRPO logs with ``log_completions`` (healthy, weights corrupted after
step 10, collapsed), real Harbor 0.26 models (zero completing trials), and verl/SkyRL dumps
reconstructed from their source (``tests/fixtures/generators/rollout_dumps_rebuilt.py``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from probes.models import MetricPoint
from probes.remote.rollouts import collect_rollouts
from probes.rollouts import (
    DumpRole,
    RolloutFacts,
    TrialSample,
    TrialSampleSet,
    rollout_facts,
)
from report.deep_probe import judge_rollouts
from report.sample_text import quote
from report.settings import DeepProbeSettings
from tests.probes.remote.test_rollouts import dumps_module

FIX = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
TRL = FIX / "trl-1.16.0"


def trl(mode: str) -> RolloutFacts:
    text = (TRL / f"probe_{mode}.out").read_text(encoding="utf-8", errors="replace")
    return rollout_facts(None, log_text=text, log_path=f"probe_{mode}.out")


def kinds(facts: RolloutFacts, settings: DeepProbeSettings | None = None) -> str:
    result = judge_rollouts(facts, settings)
    return result.verdict + " | " + " || ".join(result.reasons)


def test_healthy_trl_run_is_no_kill() -> None:
    """The real healthy GRPO run: NO-KILL, saying what it read."""
    result = judge_rollouts(trl("healthy"))
    assert result.verdict == "NO-KILL"
    assert result.reasons == ["no pathology found in 160 samples from 20 steps"]
    assert result.read["dumps"][0]["kind"] == "trl-log"


def test_corrupted_weights_are_garbage() -> None:
    """Noise added to the policy after step 10: garbage, compression shift, cut lengths."""
    text = kinds(trl("corrupt"))
    assert text.startswith("KILL")
    assert "weight-sync garbage at step 20 (TRL printed completions): 8/8 samples" in text
    assert "every output cut at the max length" in text
    assert "\\x" in text  # control characters quoted escaped, never raw


def test_collapsed_run_repeats_and_loses_diversity() -> None:
    """lr 0.3: one token repeated, identical samples per prompt, constant reward."""
    text = kinds(trl("collapse"))
    assert "single token repeated at step 20" in text
    assert "collapsed diversity at step 20" in text
    assert "constant reward in every group at step 20" in text


def _verl(tmp: Path, outputs: list[str], scores: list[float], steps: int = 3) -> RolloutFacts:
    dumps = dumps_module()
    lines = []
    for step in range(1, steps + 1):
        base = [f"the answer is {i + step} because {i} plus {step} makes {i + step} here"
                for i in range(8)]
        out = outputs if step == steps else base
        lines.append(dumps.write_verl_dump(str(tmp / "rd"), step, ["q1"] * 4 + ["q2"] * 4, out,
                                           scores if step == steps else [0, 1] * 4))
    answer = collect_rollouts({"dump_dirs": [str(tmp / "rd")]})
    return rollout_facts(answer, log_text="\n".join(lines))


HEALTHY = [f"the answer is {i} because {i} plus {i} makes {2 * i} here" for i in range(8)]


def test_verl_healthy_dump_is_silent(tmp_path: Path) -> None:
    assert kinds(_verl(tmp_path, HEALTHY, [0, 1] * 4)).startswith("NO-KILL")


@pytest.mark.parametrize(("outputs", "scores", "expected"), [
    ([""] * 8, [0, 1] * 4, "all 8 outputs are empty"),
    (HEALTHY, [0.0] * 8, "all-zero reward at step 3"),
    (HEALTHY, [1, 1, 1, 1, 0, 0, 0, 0], "constant reward in every group"),
    (["same words every time for this prompt ok"] * 8, [0, 1] * 4, "collapsed diversity"),
    (["go go go go go go go go go go"] * 8, [0, 1] * 4, 'repeat "go"'),
])
def test_verl_pathologies_fire(tmp_path: Path, outputs: list[str], scores: list[float],
                               expected: str) -> None:
    assert expected in kinds(_verl(tmp_path, outputs, scores))


def test_reward_range(tmp_path: Path) -> None:
    """Rewards outside the configured verifier range fire; inside it they do not."""
    facts = _verl(tmp_path, HEALTHY, [0, 5] * 4)
    assert "outside the verifier's range [0, 1]" in kinds(
        facts, DeepProbeSettings(reward_range=(0, 1)))
    assert "outside" not in kinds(facts, DeepProbeSettings(reward_range=(0, 5)))


def test_skyrl_cut_at_length(tmp_path: Path) -> None:
    """SkyRL eval dumps whose every stop_reason is "length" are degenerate; mixed are not."""
    dumps = dumps_module()
    dumps.write_skyrl_evals(str(tmp_path), 5, ["p"] * 4, HEALTHY[:4], [0, 1, 0, 1], ["length"] * 4)
    facts = rollout_facts(collect_rollouts({"dump_dirs": [str(tmp_path)]}))
    assert 'stop_reason "length"' in kinds(facts)
    dumps.write_skyrl_evals(str(tmp_path), 5, ["p"] * 4, HEALTHY[:4], [0, 1, 0, 1],
                            ["stop", "length", "stop", "stop"])
    facts = rollout_facts(collect_rollouts({"dump_dirs": [str(tmp_path)]}))
    assert kinds(facts).startswith("NO-KILL")


def test_skyrl_per_token_rewards_are_scored(tmp_path: Path) -> None:
    """SkyRL's agent loop dumps each eval score as a per-token list (the verifier's reward on the
    last token): all of them summing to 0 is all-zero reward, a mixed dump is not."""
    dumps = dumps_module()

    def per_token(last: float) -> list[float]:
        return [0.0] * 30 + [last]

    dumps.write_skyrl_evals(str(tmp_path), 5, ["p"] * 4, HEALTHY[:4],
                            [per_token(0.0)] * 4, ["stop"] * 4)
    answer = collect_rollouts({"dump_dirs": [str(tmp_path)]})
    assert [s["score"] for s in answer["dumps"][0]["steps"][0]["samples"]] == [0.0] * 4
    assert "all-zero reward at step 5 (SkyRL eval dump)" in kinds(rollout_facts(answer))
    dumps.write_skyrl_evals(str(tmp_path), 5, ["p"] * 4, HEALTHY[:4],
                            [per_token(r) for r in (0.0, 1.0, 0.0, 1.0)], ["stop"] * 4)
    facts = rollout_facts(collect_rollouts({"dump_dirs": [str(tmp_path)]}))
    assert kinds(facts).startswith("NO-KILL")
    assert [s.score for s in facts.dumps[0].steps[0].samples] == [0.0, 1.0, 0.0, 1.0]


def test_skyrl_evals_between_eval_intervals_are_not_missing(tmp_path: Path) -> None:
    """SkyRL dumps its evals every ``eval_interval`` steps (default 5), not every step: a
    healthy run logged to step 33 with its last eval at 30 read KILL "rollouts missing for
    logged steps ... (3 steps without rollouts)". Eval dumps are judged like verl's
    validation dumps here; the training batches SkyRL dumps each step (``dumped_data``,
    ``dump_data_batch``) still tell missing rollouts."""
    dumps = dumps_module()
    for step in (0, 5, 10, 15, 20, 25, 30):
        dumps.write_skyrl_evals(str(tmp_path), step, ["p"] * 4, HEALTHY[:4], [0, 1, 0, 1],
                                ["stop"] * 4)

    def judged(last_logged: int) -> str:
        series = tuple(MetricPoint(step=s, values={"reward": 0.5})
                       for s in range(1, last_logged + 1))
        facts = rollout_facts(collect_rollouts({"dump_dirs": [str(tmp_path)]}))
        return kinds(facts.model_copy(update={"series": series}))

    shutil.rmtree(tmp_path / "dumped_data")
    assert judged(33).startswith("NO-KILL") and judged(40).startswith("NO-KILL")
    (tmp_path / "dumped_data").mkdir()
    for step in range(1, 34):
        (tmp_path / "dumped_data" / f"global_step_{step}_training_input.pkl").write_bytes(b"x")
    assert judged(34).startswith("NO-KILL")
    assert "the log reaches step 40 but the training batches beside " in judged(40)
    assert "end at step 33 (7 steps without rollouts)" in judged(40)


def test_rollouts_missing_for_logged_steps(tmp_path: Path) -> None:
    """The log reaches step 20 while the dump stops at step 3: missing rollouts."""
    facts = _verl(tmp_path, HEALTHY, [0, 1] * 4)
    series = tuple(MetricPoint(step=s, values={"reward": 0.5}) for s in range(1, 21))
    assert "rollouts missing for logged steps" in kinds(facts.model_copy(
        update={"series": series}))
    assert "missing" not in kinds(facts.model_copy(update={"series": series[:4]}))


def _timed(gen: float, step: float, rate: float) -> tuple[MetricPoint, ...]:
    early = tuple(MetricPoint(step=s, values={"gen_s": 50, "step_s": 100, "tokens_per_s": 900})
                  for s in range(1, 6))
    late = tuple(MetricPoint(step=s, values={"gen_s": gen, "step_s": step, "tokens_per_s": rate})
                 for s in range(6, 9))
    return early + late


def test_engine_starvation() -> None:
    """Generation dominating each step at ~0 tokens/s fires; a normal split does not."""
    starved = RolloutFacts(series=_timed(990, 1000, 0.2))
    assert "engine starvation: generation takes 99% of every step" in kinds(starved)
    assert kinds(RolloutFacts(series=_timed(60, 100, 850))).startswith("NO-KILL")


def test_log_ratio_jump_while_noise(tmp_path: Path) -> None:
    """A log-ratio jump is named when the samples turned to noise, and only then."""
    noisy = _verl(tmp_path, ["\x03\ufffd\x1e\ufffd\x02 \ufffd\x01\ufffd"] * 8, [0, 1] * 4)
    series = tuple(MetricPoint(step=s, values={"log_ratio_abs_mean": 0.01 if s < 3 else 0.4})
                   for s in range(1, 4))
    assert "per-token log-ratio jumped to 0.4" in kinds(noisy.model_copy(
        update={"series": series}))
    calm = _verl(tmp_path, HEALTHY, [0, 1] * 4)
    assert "log-ratio" not in kinds(calm.model_copy(update={"series": series}))


def test_zero_trials_completing() -> None:
    """Real Harbor trials all ending in EnvironmentStartTimeoutError: zero completing."""
    root = FIX / "harbor-0.26.0" / "zero-complete" / "jobs"
    facts = rollout_facts(collect_rollouts({"trial_roots": [str(root)]}))
    text = kinds(facts)
    assert "zero trials completing: all 16 sampled trials (of 16) ended in an exception" in text
    assert "EnvironmentStartTimeoutError x16" in text


def test_mixed_harbor_eval_completes() -> None:
    """The mixed real eval (passes, fails, timeouts) is not "zero completing"."""
    root = FIX / "harbor-0.26.0" / "jobs" / "2026-11-30__10-00-00"
    assert kinds(rollout_facts(collect_rollouts({"trial_roots": [str(root)]}))).startswith(
        "NO-KILL")


def test_trials_that_never_finish_are_zero_completing() -> None:
    """Harbor writes a trial's result.json when it ends: a run whose sampled trials have none
    read 'nothing to judge: no rollouts were found'. Past the stall window since the oldest
    started (60 min, the rulebook's "no result.json for 60+ min"), zero trials completing;
    before it, a fresh run's first trials are running: nothing to judge yet, said so."""
    def unfinished(minutes: float) -> RolloutFacts:
        return RolloutFacts(trials=TrialSampleSet(roots=("/r/jobs",), listed=40, unfinished=20,
                                                  unfinished_age_s=minutes * 60))

    dead = judge_rollouts(unfinished(95))
    assert dead.verdict == "KILL"
    assert dead.reasons == ["zero trials completing: none of 20 sampled trials (of 40) has "
                            "a result.json, the oldest started 95 min ago"]
    fresh = judge_rollouts(unfinished(10))
    assert fresh.verdict == "NO-KILL"
    assert fresh.reasons == ["nothing to judge yet: none of 20 sampled trials (of 40) has "
                             "finished, the oldest started 10 min ago"]


def test_nothing_read_is_no_kill_and_says_so() -> None:
    result = judge_rollouts(RolloutFacts())
    assert result.verdict == "NO-KILL" and result.reasons[0].startswith("nothing to judge")
    pending = judge_rollouts(RolloutFacts(), pending=True)
    assert pending.reasons == ["nothing to judge yet: the job is still PENDING (no log, no "
                               "rollouts)"]


def test_nothing_read_because_skipped_says_so() -> None:
    """Rollouts that were there but not read (a dir the probe's account may not list) are
    not "no rollouts were found": the reason says they could not be read, and why."""
    why = "/home/u/run/rollout_data: PermissionError"
    result = judge_rollouts(RolloutFacts(skipped=(why,)))
    assert result.verdict == "NO-KILL"
    assert result.reasons == [f"nothing to judge: no rollouts could be read (1 skipped, e.g. "
                              f"{why}); the row cannot be confirmed from its rollouts"]


def test_quote_escapes_and_truncates() -> None:
    assert quote('a"\x1b\nb' + "x" * 100, 10) == '"a\\"\\x1b\\nbxxxxx…"'


def test_a_validation_dump_alone_is_judged_for_garbage(tmp_path: Path) -> None:
    """A verl run that dumps only its validation generations (``trainer.validation_data_dir``)
    is read from them: the newest turned to weight-sync garbage read NO-KILL "no pathology
    found in 16 samples" (validation dumps served only as another source's baseline). Its
    text is judged (the same synced weights generate it); a greedy, n=1 validation set that
    scores 0 on a hard benchmark or repeats one answer per prompt is not a finding."""
    dumps = dumps_module()
    prompts = [f"q{i}" for i in range(8)]
    val = tmp_path / "validation_data"
    roles: dict[str, DumpRole] = {str(val): "validation"}
    dumps.write_verl_dump(str(val), 0, prompts, HEALTHY, [0.0] * 8)
    dumps.write_verl_dump(str(val), 10, prompts * 2, HEALTHY * 2, [0.0] * 16)
    answer = collect_rollouts({"dump_dirs": [str(val)]})
    assert kinds(rollout_facts(answer, roles=roles)).startswith("NO-KILL")
    dumps.write_verl_dump(str(val), 20, prompts, ["\ufffd\x07\x1b\ufffd\x00" * 40] * 8,
                          [0.0] * 8)
    answer = collect_rollouts({"dump_dirs": [str(val)]})
    text = kinds(rollout_facts(answer, roles=roles))
    assert "weight-sync garbage at step 20 (verl validation dump)" in text


def test_agent_messages_turned_to_noise(tmp_path: Path) -> None:
    """Trials whose agents' last messages are byte noise fire garbage; sane ones do not."""
    import json

    def job(messages: list[str]) -> RolloutFacts:
        root = tmp_path / f"j{len(list(tmp_path.iterdir()))}"
        for i, message in enumerate(messages):
            (root / f"t{i}" / "agent").mkdir(parents=True)
            (root / f"t{i}" / "result.json").write_text(json.dumps(
                {"verifier_result": {"rewards": {"reward": float(i % 2)}},
                 "finished_at": "2026-12-01T00:00:00Z"}))
            steps = [{"source": "agent", "message": message}]
            (root / f"t{i}" / "agent" / "trajectory.json").write_text(json.dumps({"steps": steps}))
        (root / "result.json").write_text("{}")
        return rollout_facts(collect_rollouts({"trial_roots": [str(root)]}))

    noisy = kinds(job(["\ufffd\x02\ufffd\x03 \ufffd\x1e\ufffd"] * 4))
    assert "weight-sync garbage at the agents' last messages (4 trials)" in noisy
    assert kinds(job(["I ran the tests; 3 of 4 pass.", "Fixed the config.",
                      "cat README.md", "Done: build is green."])).startswith("NO-KILL")


def test_compression_against_the_validation_dump(tmp_path: Path) -> None:
    """With one rollout step, the validation dump is the baseline: printable noise is caught."""
    import random
    import string

    dumps = dumps_module()
    rng = random.Random(0)
    noise = ["".join(rng.choice(string.ascii_letters + string.punctuation) for _ in range(120))
             for _ in range(8)]
    sane = [f"the answer is {i} because {i} plus {i} makes {2 * i} so we write {2 * i} here"
            for i in range(8)]
    prompts = ["q1"] * 4 + ["q2"] * 4
    dumps.write_verl_dump(str(tmp_path / "rollout_data"), 7, prompts, noise, [0, 1] * 4)
    dumps.write_verl_dump(str(tmp_path / "validation_data"), 5, prompts, sane, [0, 1] * 4)
    roles: dict[str, DumpRole] = {str(tmp_path / "validation_data"): "validation"}
    answer = collect_rollouts({"dump_dirs": [str(tmp_path / "rollout_data"),
                                             str(tmp_path / "validation_data")]})
    text = kinds(rollout_facts(answer, roles=roles))
    assert "compression ratio" in text and "baseline step 5" in text
    answer = collect_rollouts({"dump_dirs": [str(tmp_path / "rollout_data")]})
    assert kinds(rollout_facts(answer)).startswith("NO-KILL")  # no baseline, no claim


def test_agents_served_nothing() -> None:
    """Real Harbor 'dead engine' trials (0 s agent runs, null output tokens) are starvation."""
    dead = FIX / "harbor-0.26.0" / "jobs" / "2026-11-30__14-00-00"
    text = kinds(rollout_facts(collect_rollouts({"trial_roots": [str(dead)]})))
    assert "engine starvation: all 24 sampled trials' agents ran for <= 1 s" in text
    assert ": 1 turns)" in text, text  # a turn count reads as the count Harbor wrote, not 1.0
    mixed = FIX / "harbor-0.26.0" / "jobs" / "2026-11-30__10-00-00"
    assert "starvation" not in kinds(rollout_facts(collect_rollouts({"trial_roots":
                                                                     [str(mixed)]})))


def test_question_marks_count_as_unshowable_only_in_log_samples() -> None:
    """The sweep shows control bytes as '?': garbage in a log tail, a plain '?' in a dump."""
    from report.sample_text import bad_char_share

    shown = "ok?? ?x??? ???" + "?" * 10
    assert bad_char_share(shown) == 0.0
    assert bad_char_share(shown, masked="?") > 0.5
    assert bad_char_share("Why is 2+2 equal to 4?", masked="") == 0.0


def test_run_dead_after_healthy_trials_is_judged_on_its_newest_trials() -> None:
    """Real Harbor 0.26.0 trials of one run over three jobs: a healthy first job (10:00), then
    a dead engine (14:00: one episode, 0 s agents, null output) and an instant-fail job
    (16:00). Replayed as an agentic RL run on the real SLURM, ``jobtables probe`` said NO-KILL
    ('no pathology found in 64 of 72 trials'): every rule wanted ALL sampled trials bad, and
    the old healthy ones never are. The newest third alone is the run now: KILL."""
    root = FIX / "harbor-0.26.0" / "jobs"
    result = judge_rollouts(rollout_facts(collect_rollouts({"trial_roots": [str(root)]})))
    assert result.verdict == "KILL", result.reasons
    assert any(r.startswith("engine starvation now: the newest ") for r in result.reasons)
    # the healthy job alone, and the zero-complete job alone, read as before
    healthy = root / "2026-11-30__10-00-00"
    assert kinds(rollout_facts(collect_rollouts({"trial_roots": [str(healthy)]}))).startswith(
        "NO-KILL")


def _trials(newest: str) -> RolloutFacts:
    """64 trials of an agentic run: a third solved, the rest ContextLengthExceededError as
    SkyRL's Harbor runs leave it (no verifier_result: the generator trains it as reward 0),
    then the newest 24 all ending in ``newest`` with no reward."""
    trials = []
    for i in range(64):
        stamp = f"2026-12-05T05:{i // 2:02d}:{i % 2 * 30:02d}+00:00"
        solved = i < 40 and i % 3 == 0
        kind = newest if i >= 40 else (None if solved else "ContextLengthExceededError")
        trials.append(TrialSample(name=f"task-{i:03d}__abcdefg", exception_type=kind,
                                  reward=1.0 if solved else None, started_at=stamp,
                                  finished_at=stamp))
    return RolloutFacts(trials=TrialSampleSet(listed=64, sampled=tuple(trials)))


@pytest.mark.parametrize("passthrough", ["ContextLengthExceededError", "AgentTimeoutError"])
def test_a_passthrough_tail_is_no_death(passthrough: str) -> None:
    """The newest trials all ending in a Harbor passthrough exception (a context overflow, an
    agent timeout: the hard tail) completed their rollouts (rulebook: benign, "the rollout
    completes"): not "zero trials completing now". Found replaying a SkyRL-style Harbor tree
    through ``jobtables probe``: KILL on a healthy run. A dead environment still is."""
    assert kinds(_trials(passthrough)).startswith("NO-KILL")
    dead = kinds(_trials("EnvironmentStartTimeoutError"))
    assert "zero trials completing now: the newest 21 of 64 sampled trials" in dead


def _verl_console(degenerate: bool) -> str:
    """verl 0.9.1's real console lines; ``degenerate``: score 0 and 1-token responses."""
    text = (FIX / "verl-0.9.1" / "console.log").read_text()
    if degenerate:
        text = re.sub(r"critic/score/mean:[^ ]+", "critic/score/mean:np.float64(0.0)", text)
        text = re.sub(r"response_length/mean:[^ ]+", "response_length/mean:np.float64(1.0)",
                      text)
    return text


def test_a_dead_series_with_no_literal_rollouts_is_kill_quoting_the_series() -> None:
    """The row flags dead-rollouts (reward flat at 0, ~1-token responses) and asks for a deep
    probe; a run that dumps no rollouts and prints no completions used to get NO-KILL ("nothing
    to judge") from the probe while its own printed series showed every rollout degenerate.
    The series is the rollouts' evidence too: KILL, quoting it."""
    result = judge_rollouts(rollout_facts(None, log_text=_verl_console(True), log_path="c.log"))
    assert result.verdict == "KILL"
    text = " || ".join(result.reasons)
    assert "reward flat at 0" in text and "responses ~1.00 token" in text
    assert "logged series" in text

    alive = judge_rollouts(rollout_facts(None, log_text=_verl_console(False), log_path="c.log"))
    assert alive.verdict == "NO-KILL"


def test_the_series_rule_reads_the_configured_thresholds() -> None:
    """The probe judges the series by the row's own thresholds (``[thresholds]``): a window the
    config calls too short to judge is not dead to the probe either."""
    from report.settings import Thresholds

    facts = rollout_facts(None, log_text=_verl_console(True), log_path="c.log")
    assert judge_rollouts(facts, thresholds=Thresholds(window=500, min_window=500)
                          ).verdict == "NO-KILL"


def test_newest_dumps_with_no_readable_sample_are_said(tmp_path: Path) -> None:
    """A verl dump dir whose newest step files hold no sample that reads (the hostile dry run:
    a 5 GB sparse ``4.jsonl`` read as NULs, a ``5.jsonl`` whose first line is 50 MB, cut at the
    read bound): the NO-KILL said "no pathology found in 8 samples from 4 steps" though only
    the first step gave samples (here: 16 from 4, two of them empty). Its reason counts the
    steps that gave samples and names the newest ones that gave none: their rollouts are
    unjudged, not healthy."""
    dumps = dumps_module()
    lines = [dumps.write_verl_dump(str(tmp_path / "rd"), step, ["q1"] * 4 + ["q2"] * 4,
                                   [f"the answer is {i + step} since {i} and {step}"
                                    for i in range(8)], [0, 1] * 4) for step in (1, 2)]
    with (tmp_path / "rd" / "3.jsonl").open("wb") as f:
        f.truncate(3 << 20)
    (tmp_path / "rd" / "4.jsonl").write_text('{"output": "' + "A" * (2 << 20) + '"}\n'
                                              + '{"output": "fine", "score": 1}\n')
    facts = rollout_facts(collect_rollouts({"dump_dirs": [str(tmp_path / "rd")]}),
                          log_text="\n".join(lines))
    result = judge_rollouts(facts)
    assert result.verdict == "NO-KILL"
    assert result.reasons[0].startswith("no pathology found in 16 samples from 2 steps;")
    assert "steps 3, 4" in result.reasons[0] and "no readable sample" in result.reasons[0]


def test_unfinished_trials_are_timed_from_the_jobs_own_start() -> None:
    """A restart beside the trial dirs its walltime-killed attempt left unfinished: the oldest
    unfinished trial started two hours ago, but the job itself five minutes ago. Its own
    trials have had five minutes, not two hours: nothing to judge yet, never KILL (a KILL on a
    running job offers Slack's Cancel). Once the job itself has run past the stall window with
    no trial ended, zero trials completing, timed from its start."""
    facts = RolloutFacts(trials=TrialSampleSet(roots=("/r/jobs",), listed=32, unfinished=32,
                                               unfinished_age_s=120 * 60))
    fresh = judge_rollouts(facts, running_s=5 * 60)
    assert fresh.verdict == "NO-KILL"
    assert fresh.reasons[0].startswith("nothing to judge yet: none of 32 sampled trials")
    stalled = judge_rollouts(facts, running_s=90 * 60)
    assert stalled.verdict == "KILL"
    assert stalled.reasons == ["zero trials completing: none of 32 sampled trials (of 32) has "
                               "a result.json, the job started 90 min ago"]
    assert judge_rollouts(facts).verdict == "KILL"  # its start unknown: the trials' own age
