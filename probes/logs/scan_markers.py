"""The marker layer of ``MetricScan`` (``probes.logs.history``): what a line says once of the
run rather than of a step: start-up totals (banners, torchtitan's, slime's printed arguments,
prime-rl's loop, NeMo's scheduler), checkpoint saves, Harbor progress, HF's ``logging_*``
arguments, rollout geometry and completion marks (``_markers``, ``_run_markers``). Read by
``feed``, by ``skim`` before the metric suffix, and in part by ``seed_head`` from a cut tail's
head; every gate here is in ``scan_patterns.MARKER_GATES``, so a line holding none marks
nothing.
"""

from __future__ import annotations

from probes.logs.bracket_lines import DURATION_GATE, duration_epochs
from probes.logs.harbor_progress import harbor_row
from probes.logs.pair_lines import MAXTEXT_STEPS, maxtext_total
from probes.logs.scan_patterns import (
    BANNER_GATES,
    BANNER_RE,
    BATCH_GATES,
    BATCH_RE,
    CHECKPOINT_RE,
    DS_GATES,
    EPOCH_CONFIG_GATES,
    EPOCH_CONFIG_RE,
    HF_SAVE_RE,
    LAUNCH_LOOPS,
    LOGGING_RE,
    LOOP_TOTAL_RE,
    MAX_EPOCHS_RE,
    NEMO_GATES,
    NEMO_MAX_STEPS_RE,
    SAMPLES_RE,
    VERL_SFT_STEPS,
    banner_steps,
)
from probes.logs.scan_summary import SummaryScan
from probes.logs.skyrl_batches import (
    REGENERATE_GATE,
    RESAMPLE_GATE,
    is_regenerate,
    is_resample,
    saved_step,
)
from probes.logs.slime_lines import ARGS_GATE, SlimeArgs
from probes.logs.titan_lines import TITAN_INIT, TITAN_START, titan_total


class MarkerScan(SummaryScan):
    """``MetricScan``'s run markers (the layer below ``history``'s line reader)."""

    slime_args = SlimeArgs()
    """The printed arguments giving slime's total steps (``probes.logs.slime_lines``)."""

    def _titan_init(self, body: str) -> None:
        """A newer torchtitan's ``Trainer is initialized with ... total steps N``: its total."""
        total = titan_total(body)
        if total is not None:
            self.banner_total = total

    def _slime_args(self, body: str) -> None:
        """One of Megatron's printed arguments: slime's total once its are all read."""
        read = self.slime_args.read(body)
        if read is not self.slime_args:
            self.slime_args = read
            if read.total is not None:
                self.banner_total = read.total

    def _banner(self, body: str, line_no: int) -> None:
        """A start-up total (``BANNER_RE``): the run's total, and a trainer start line."""
        banner = BANNER_RE.search(body)
        if banner is not None:
            self._launched("hf" if banner.group(1) else "total", line_no)
            if banner.group(1):  # SkyRL and verl both print "Total training steps: N"
                self._mark("hf")
            if banner.group(3):
                self._mark(VERL_SFT_STEPS)
            self.banner_total = banner_steps(banner)

    def _markers(self, body: str, line_no: int) -> None:
        """Banner totals, checkpoint saves, completion, Harbor progress, rollout geometry."""
        if any(gate in body for gate in BANNER_GATES):
            self._banner(body, line_no)
        if "heckpoint" in body or "global_step_" in body:
            saved = CHECKPOINT_RE.search(body)
            if saved is not None:
                self.checkpoints.add(int(saved.group(1) or saved.group(2)))
            if "Saving model checkpoint" in body and not self._skimming:
                hf_save = HF_SAVE_RE.search(body)
                if hf_save is not None:
                    self._on_hf_save(int(hf_save.group(1)))
        self._batch_markers(body)
        if "/" in body:
            harbor = harbor_row(body)
            if harbor is not None:
                self._mark("harbor")
                self.harbor, self.harbor_metric = harbor[:3], harbor[3]
        if TITAN_START in body:
            self._titan_start(body, line_no)
        if TITAN_INIT in body:
            self._titan_init(body)
        if ARGS_GATE in body:
            self._slime_args(body)
        if "effective maximum steps" in body:  # NeMo's scheduler: the run's max_steps
            found = NEMO_MAX_STEPS_RE.search(body)
            if found is not None and int(found.group(1)) > 0:
                self.banner_total = int(found.group(1))
        if any(gate in body for gate in NEMO_GATES):
            self._nemo_markers(body)
        if ("Num " in body or BATCH_GATES[0] in body or BATCH_GATES[1] in body) and (
                self._hf_banner_line(body)):
            self._mark("hf")
            self._launched("hf", line_no)
        if any(gate in body for gate in DS_GATES):
            self._ds_total(body)
        if any(gate in body for gate in EPOCH_CONFIG_GATES):
            self.epoch_config(body)
        if "logging_" in body:
            for name, raw in LOGGING_RE.findall(body):
                self.hf_banner = self.hf_banner.with_logging(name, raw)
        self._run_markers(body, line_no)
        self.finish_marks(body)

    def epoch_config(self, body: str) -> None:
        """The run's epochs (and torchtune's cap on steps an epoch) its printed config names:
        torchtune's YAML ``epochs: 3``, mmengine's ``train_cfg = dict(..., max_epochs=3, ...)``.
        Read from a cut tail's head too (``seed_head``): a config is printed once, at start."""
        config = EPOCH_CONFIG_RE.match(body)
        if config is not None:
            value = None if config.group(2) == "null" else int(config.group(2))
            if config.group(1) == "epochs":
                self.config_epochs = value
            else:
                self.config_epoch_cap = value
            return
        found = MAX_EPOCHS_RE.search(body) if "max_epochs" in body else None
        if found is not None and int(found.group(1)) > 0:
            self.config_epochs = int(found.group(1))

    def _batch_markers(self, body: str) -> None:
        """What measures a batches bar's lead over its step (``probes.logs.skyrl_batches``):
        SkyRL's save line (the step of its bar's next redraw) and resample line, verl DAPO's
        regenerate line. A skim's lines say only that there was one."""
        state = self.skyrl_batches
        saved = saved_step(body) if not self._skimming else None
        if saved is not None:
            state = state._replace(anchor=saved)
        if RESAMPLE_GATE in body and is_resample(body):
            state = state._replace(seen=True, resampled=state.resampled or not self._skimming)
        if REGENERATE_GATE in body and is_regenerate(body):
            state = state._replace(regenerated=True)
        self.skyrl_batches = state

    def _run_markers(self, body: str, line_no: int) -> None:
        """Rollout geometry, OpenRLHF's resume, prime-rl's loop start (its total), the epochs
        llm-foundry's config plans and MaxText's ``Config param steps`` (printed once at the
        start: skimmed too)."""
        if DURATION_GATE in body:
            self.epochs_planned = duration_epochs(body) or self.epochs_planned
        if MAXTEXT_STEPS in body:
            self.banner_total = maxtext_total(body) or self.banner_total
        if "train_batch_size" in body or "n_samples_per_prompt" in body:
            samples, batch = SAMPLES_RE.search(body), BATCH_RE.search(body)
            self.samples = int(samples.group(1)) if samples else self.samples
            self.batch = int(batch.group(1)) if batch else self.batch
        if "rollout_batch_size" in body or "consumed_samples: " in body:
            self._resume_marker(body)
        if "training loop" in body or "orchestrator loop" in body:
            self._loop_total(body, line_no)

    def _loop_total(self, body: str, line_no: int | None = None) -> None:
        """prime-rl's ``Starting ... loop (max_steps=N)``: the run's total steps; at
        ``line_no`` (None: the log's head), a trainer start line (``_launched``)."""
        for loop in LAUNCH_LOOPS:
            if loop in body and line_no is not None:
                self._launched(loop, line_no)
        found = LOOP_TOTAL_RE.search(body)
        if found is not None and int(found.group(1) or found.group(2)) > 0:
            self.banner_total = int(found.group(1) or found.group(2))
