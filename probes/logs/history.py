"""The metric pass over one log tail: metric history, progress bars, rate, markers, log clock.

Policy: ``MetricScan.feed`` takes the cleaned lines of one tail in order and never raises on
their content; cheap substring gates guard every regex, and ``METRIC_LINES`` names every gate,
so a line holding none of them changes nothing (``probes.logs.parse`` prefilters on that).
Only canonical metric names (``probes.logs.metric_names``) reach a point; a dict cut at the top
of the tail is dropped, never misread; HF dicts, which carry no step, take the training bar's
count, or with no bar the step their epoch gives by the trainer's banner (``HfBanner``).
Stamps are read on the log's own clock (``probes.logs.clock``). Pure per-line results that
repeat (dataset bars, noise timestamps, a step's metric-name plan) are remembered for the
length of one tail. ``MetricScan`` is built of layers, one module each (``probes.logs.scan_core``
says how); this one reads each line (``feed``, ``skim``, ``seed_head``); the run's markers it
finds are read by the layer below, ``probes.logs.scan_markers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from probes.logs.areal_lines import ROW_GATE
from probes.logs.bar_lines import may_be_lightning, parse_tqdm
from probes.logs.bracket_lines import (
    DURATION_GATE,
    BracketStep,
    bracket_header,
)
from probes.logs.clock import STAMP_LEADS
from probes.logs.easyr1_lines import YamlStep, easyr1_header
from probes.logs.harbor_progress import harbor_progress
from probes.logs.hf_cadence import HfCadence
from probes.logs.lines import (
    MMENGINE_EPOCH_GATE,
    MMENGINE_GATE,
    NESTED_BAR_MARK,
    XTUNER_GATE,
    may_be_iteration,
    parse_iteration,
    parse_reward_line,
    parse_status_line,
    parse_verl,
    strip_ray_prefix,
)
from probes.logs.litgpt_lines import LITGPT_GATE, parse_litgpt
from probes.logs.mirror_lines import MIRROR_GATE
from probes.logs.nemo_sc_lines import METRICS_GATE as NEMO_SC_METRICS
from probes.logs.nemo_sc_lines import STEP_GATE as NEMO_SC_STEP
from probes.logs.pair_lines import (
    EQ_GATE,
    MAXTEXT_STEPS,
    other_rank,
    parse_eq_pairs,
    parse_step_pairs,
)
from probes.logs.prefilter import needle_pattern
from probes.logs.progress import EPISODE_BAR, training_desc
from probes.logs.rich_panel import MetricsPanel, is_panel_top
from probes.logs.scan_markers import MarkerScan
from probes.logs.scan_patterns import (
    BANNER_GATES,
    BANNER_RE,
    BATCH_GATES,
    DS_GATES,
    EPOCH_CONFIG_GATES,
    GLOBAL_STEP_RE,
    LAUNCH_LOOPS,
    LOGGING_RE,
    MARKER_GATES,
    PIPE_STEP_RE,
    SKYRL_HEADER_RE,
    VERL_SFT_STEPS,
    banner_steps,
)
from probes.logs.slime_lines import ARGS_GATE, SLIME_GATE
from probes.logs.titan_lines import TITAN_INIT
from probes.logs.tracker_records import TRACKER_GATE

MARKER_GATE = needle_pattern(MARKER_GATES)
"""Any of ``MARKER_GATES``, one trie regex searched in C: a line it does not meet marks
nothing in ``_markers`` unless it is a Harbor row (``harbor_row``, which has no gate of its
own: such a row holds a ``/``). Every line ``feed`` takes no other way reaches ``_markers``,
whose two dozen gates tested one by one were most of the cost of a line that is nothing (a
MiB of ``Step x`` lines: 0.6 s)."""
_BRACKET_ENDS = ("]", "]:")
"""How a bracketed progress header ends (``probes.logs.bracket_lines``)."""


class MetricScan(MarkerScan):
    """The stateful pass over one tail; ``summary()`` freezes it into a ``LogSummary``.

    ``mtime`` (the file's) places year-less stamps until the log shows a dated one;
    ``engine_line`` asks for the log clock's reading at that line (``engine_at``): the line's
    own stamp, else the last one before it (vLLM's access lines carry none).
    """

    panel: MetricsPanel | None = None
    """open-instruct's ``Metrics`` panel being read (``probes.logs.rich_panel``)."""

    def feed(self, line: str, raw: str, line_no: int) -> None:
        """Classify one cleaned line; cheap substring tests gate every regex."""
        body = strip_ray_prefix(line)
        if self.engine_line is not None and line_no > self.engine_line:
            self._read_engine_line()
        stamp = self.clock.place(self._stamp(body)) if body[:1] in STAMP_LEADS else None
        if line_no == self.engine_line:
            self._read_engine_line()
        if self.yaml_step is not None and self._yaml_line(body, line_no):
            return
        if (self.panel is not None or body[:1] == "╭") and self._panel_line(body, line_no, stamp):
            return
        if body.endswith(_BRACKET_ENDS) and self._bracket_header(body, line_no, stamp):
            return
        lead = body.lstrip()[:1]
        if self.dict_lines is not None and lead in ("'", '"'):
            self._continue_dict(body, line_no)
            return
        if lead == "{":
            self._start_dict(body, line_no)
            return
        if "%|" in body and may_be_lightning(body):
            self._lightning(body, line_no)
        if "%|" in body:
            bar = self._bar(body)
            if bar is not None:
                self._feed_bar_line(bar, body, NESTED_BAR_MARK in raw, line_no)
                return
        if "iteration" in body or MMENGINE_GATE in body or MMENGINE_EPOCH_GATE in body:
            iteration = parse_iteration(body)
            if iteration is not None:
                self._on_iteration(iteration, line_no, stamp)
                return
        if MIRROR_GATE in body and self._mirror_line(body, line_no, stamp):
            return
        if (NEMO_SC_METRICS in body or NEMO_SC_STEP in body) and self._nemo_sc_line(
                body, line_no, stamp):
            return
        if SLIME_GATE in body and self._slime_line(body, line_no, stamp):
            return
        if "step:" in body and (self._verl_line(body, line_no)
                                or self._titan_step(body, line_no, stamp)):
            return
        if ("] step=" in body or ", Rank: 0, loss = " in body) and self._deepspeed_line(
                body, line_no, stamp):
            return
        if "Step " in body:
            if body[:5] == "Step " and self._easyr1_header(body, line_no):
                return
            header = SKYRL_HEADER_RE.search(body)
            if header is not None:
                self._on_header(int(header.group(1)), stamp, header.group(2), line_no)
                return
            if XTUNER_GATE in body:  # XTuner v1's step line
                iteration = parse_iteration(body)
                if iteration is not None:
                    self._on_iteration(iteration, line_no, stamp)
                    return
            if self._step_line(body, line_no, stamp):
                return
        if "\u2022 " in body and self.nemo is not None and self._bullet(body, line_no):
            return
        if ROW_GATE in body and "areal" in self.formats and self._table_row(body, line_no):
            return
        if ("reward/" in body or " - {" in body) and self._skyrl_line(body):
            return
        if "lobal step " in body:
            found = GLOBAL_STEP_RE.search(body)
            if found is not None:
                self._on_global_step(int(found.group(1)), found.group(2), line_no, stamp)
                return
        if not self._late_step(body, line_no, stamp) and (
                "/" in body or MARKER_GATE.search(body) is not None):
            self._markers(body, line_no)

    def skim(self, line: str, raw: str, line_no: int, *, in_dict: bool) -> None:
        """A marker or bar line before the suffix (``probes.logs.recent``): routed as ``feed``
        routes it, so a line another reader would consume (``in_dict``: a multi-line dict's)
        adds no marker; no metric is recorded and the clock is not moved (``enter_suffix``
        sets it). Bars are counted: the training bar is chosen over the whole tail."""
        body = strip_ray_prefix(line)
        lead = body.lstrip()[:1]
        self._skimming = True
        quoted = lead in ("'", '"')
        if quoted and in_dict and "max_num_steps" in body:  # NeMo-RL's printed config
            self.nemo_epochs = self.nemo_epochs.read(body)
        if "%|" in body and lead != "{" and not (quoted and in_dict):
            if may_be_lightning(body):
                self._lightning(body, line_no)
            bar = self._bar(body)
            if bar is not None:
                self._on_bar(bar, NESTED_BAR_MARK in raw, line_no)
                if "train_runtime" in body:
                    self.skim_glued(body)
                if "` stopped: `" in body:
                    self.finish_marks(body)
                return
        if may_be_iteration(body) and lead != "{" and not (quoted and in_dict):
            iteration = parse_iteration(body)
            if iteration is not None:
                self._on_iteration(iteration, line_no, None)
                return
        if lead == "{":
            if "train_runtime" in body and body.rstrip().endswith("}"):  # HF's one-line end dict
                self._start_dict(body, line_no)
        elif MARKER_GATE.search(body) is None and harbor_progress(body) is None:
            return  # the needles match without case; _markers' gates do not
        elif not (quoted and in_dict) and not (
            ("%|" in body and self._bar(body) is not None)
            or (may_be_iteration(body) and parse_iteration(body) is not None)
            or ("step:" in body and parse_verl(body) is not None)
            or ("Step " in body and SKYRL_HEADER_RE.search(body) is not None)
            or ("reward/" in body and parse_reward_line(body) is not None)
            or ("_loss" in body and " - {" in body and parse_status_line(body) is not None)
            or ("lobal step " in body and GLOBAL_STEP_RE.search(body) is not None)
            or ("Step " in body and " | " in body and PIPE_STEP_RE.search(body) is not None)
        ):
            self._markers(body, line_no)

    def seed_head(self, lines: Sequence[str] | None) -> None:
        """Before a tail cut from a longer log (``log_start`` False): the HF training banner,
        its total, OpenRLHF's resume (``EpisodeResume``: its line, ``rollout_batch_size`` and
        the first Episode bar after it), the printed ``TrainingArguments`` logging fields and
        the kinds of trainer start line (``_launched``: one of them printed again in the tail
        is a relaunch, the old run's start line cut out of the tail) of the log's ``lines``
        (its head, the collector's first 256 KiB, ANSI stripped), read as a skim reads them:
        no metric, no other marker (what the head says of checkpoints or an end is no
        state of the tail)."""
        self.log_start = False
        for line in lines or ():
            body = strip_ray_prefix(line)
            if DURATION_GATE in body or MAXTEXT_STEPS in body:
                self._run_markers(body, 0)  # (neither is a launch line: no line number used)
            if ("Num " in body or BATCH_GATES[0] in body or BATCH_GATES[1] in body) and (
                    self._hf_banner_line(body)):
                self.launch_kinds = self.launch_kinds | {"hf"}
            if "logging_" in body:
                for name, raw in LOGGING_RE.findall(body):
                    self.hf_banner = self.hf_banner.with_logging(name, raw)
            if "= Epoch " in body or "max_num_steps" in body:
                self.nemo_epochs = self.nemo_epochs.read(body)
            if any(gate in body for gate in EPOCH_CONFIG_GATES):
                self.epoch_config(body)
            if any(gate in body for gate in BANNER_GATES):
                banner = BANNER_RE.search(body)
                if banner is not None:
                    self.launch_kinds = self.launch_kinds | {"hf" if banner.group(1) else "total"}
                # (verl's SFT prints its total nowhere else: no training bar of the run's;
                # verl's and SkyRL's RL trainers draw theirs on a Ray actor's stderr, which
                # a tail may not hold: Ray forwards tqdm's redraws only at a newline)
                if banner is not None:
                    self.banner_total = banner_steps(banner)
                if banner is not None and banner.group(3):
                    self._mark(VERL_SFT_STEPS)
            if "rollout_batch_size" in body or "consumed_samples: " in body:
                self._resume_marker(body)
            if "training loop" in body or "orchestrator loop" in body:
                self._loop_total(body)
                self.launch_kinds = self.launch_kinds | {
                    loop for loop in LAUNCH_LOOPS if loop in body}
            if any(gate in body for gate in DS_GATES):
                self._ds_total(body)
            if TITAN_INIT in body:
                self._titan_init(body)
            if ARGS_GATE in body:
                self._slime_args(body)
            if "Episode [" in body and "%|" in body:  # the resumed episode's bar, if in the head
                bar = parse_tqdm(body)
                if bar is not None and training_desc(bar.desc) == EPISODE_BAR:
                    self._see_episode_bar(bar.desc, bar.total)

    def enter_suffix(self, at: datetime | None) -> None:
        """After ``skim``: forget any half-read step, start the clock at ``at``."""
        self._skimming = False
        self.dict_lines, self.header, self.pending_reward = None, None, None
        self.pending_status, self.nemo, self.ds_losses = None, None, (0.0, 0)
        self.pending_sc = None
        self.hf_prev, self.hf_unanchored, self.hf_saved = None, [], None
        self.hf_cadence, self.yaml_step, self.panel = HfCadence(), None, None
        if at is not None:
            self.clock.reference = self.clock.last = at

    def _easyr1_header(self, body: str, line_no: int) -> bool:
        """EasyR1's ``Step N`` line: open its block (``_yaml_line`` reads it); whether it was."""
        step = easyr1_header(body)
        if step is None:
            return False
        self.yaml_step = YamlStep(step, line_no)
        return True

    def _panel_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """open-instruct's ``Metrics`` panel (``probes.logs.rich_panel``): its top opens it,
        its lines are read into it, its bottom makes it the step's point; whether the line
        was the panel's."""
        panel = self.panel
        if panel is None:
            if not is_panel_top(body):
                return False
            self.panel = MetricsPanel(line_no)
            return True
        read = panel.read(body, line_no)
        if read:
            return True
        self.panel = None
        if read is None:
            return self._panel_line(body, line_no, stamp)  # a new panel's top, or no panel line
        found = panel.metrics()
        if found is not None:
            self._mark("open-instruct")
            self._record(found[0], found[1], panel.line_no, stamp)
        return True

    def _late_step(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """``feed``'s last step readers, for a line no earlier one took: LitGPT's step line,
        a line of ``name: number`` pairs with a step (MaxText's, nanotron's) and a
        logger-prefixed one-line dict; whether one read it."""
        if LITGPT_GATE in body:
            litgpt = parse_litgpt(body)
            if litgpt is not None:
                step, values, stepped = litgpt
                if stepped or "litgpt" not in self.formats:
                    self._record(step, values, line_no, stamp)
                if stepped:
                    self._mark("litgpt")  # from here on, only the steps' own lines
                return True
        pairs = None
        if "step: " in body or "iteration: " in body or "iter: " in body:  # PAIRS_GATES
            pairs = parse_step_pairs(body)
        if pairs is None and EQ_GATE in body:  # ``name=number`` pairs, the same reading
            pairs = parse_eq_pairs(body)
        if pairs is not None:
            if other_rank(body) or (self.points and "step-pairs" not in self.formats):
                return False  # another rank's line, or the log's steps are another format's
            if pairs[1]:
                self.banner_total = pairs[1]
            self._record(pairs[0], pairs[2], line_no, stamp)
            if pairs[0] in self.points:  # (a line of no metric is no step-pairs log)
                self._mark("step-pairs")
            return True
        if body[-1:] != "}":
            return False
        if TRACKER_GATE in body and self._tracker_record(body, line_no, stamp):
            return True
        return self._prefixed_dict(body, line_no, stamp)

    def _bracket_header(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """Composer's ``[batch=N/T]:`` or OLMo's ``[step=N/T]``: open its block (read by
        ``_yaml_line``), its T the run's total when it counts the run's steps; whether it was
        one."""
        header = bracket_header(body) if "=" in body else None
        if header is None:
            return False
        step, total, by_batch, per_epoch = header
        if per_epoch is not None and self.epochs_planned is not None:
            total = per_epoch * self.epochs_planned
        if total is not None:
            self.banner_total = total
        self.yaml_step = BracketStep(step, line_no, by_batch=by_batch, at=stamp)
        return True

    def _verl_line(self, body: str, line_no: int) -> bool:
        """verl's ``step:N - key:value - ...`` line: its point, and the ``Epoch E/M`` bar it
        follows (``verl_epoch_step``); whether it was one."""
        verl = parse_verl(body)
        if verl is None:
            return False
        self._mark("verl")
        # A line of no metric ours (val/loss) says nothing of the bar: asked of the line, not
        # of whether its step is known, which a suffix read cannot tell (probes.logs.recent).
        if self._record(verl[0], verl[1], line_no, None):
            self.verl_epoch_step(verl[0])
        return True
