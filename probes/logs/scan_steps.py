"""``MetricScan``'s step-line layer: one reader per trainer's step line. Megatron's iteration
line, NeMo 1.x's Lightning postfix and a script's postfix loss (OpenRLHF's SFT/DPO/RM
step bar's in optimizer steps), DeepSpeed's engine line and
DeepSpeed-Chat's loss lines, prime-rl's and torchtune's ``Step N | ...``, NeMo-RL's step banner
and bullets, AReaL's step line and stats rows, SkyRL's reward and status lines and ``Step N:``
header, slime's lines, the wandb mirror line, torchtitan's metrics line.

Policy: ``feed`` reaches each reader behind its substring gate; a reader that returns a bool
says whether the line was its (else ``feed`` tries the next).
"""

from __future__ import annotations

import re
from datetime import datetime

from probes.logs.areal_lines import STEP_GATE, parse_step, row_pairs
from probes.logs.bar_lines import lightning_status, postfix_loss
from probes.logs.lines import (
    IterationLine,
    parse_ds_chat_loss,
    parse_ds_progress,
    parse_number,
    parse_reward_line,
    parse_status_line,
)
from probes.logs.mirror_lines import parse_mirror
from probes.logs.nemo_sc_lines import METRICS_GATE as NEMO_SC_METRICS
from probes.logs.nemo_sc_lines import STEP_GATE as NEMO_SC_STEP
from probes.logs.nemo_sc_lines import parse_metrics as nemo_sc_metrics
from probes.logs.nemo_sc_lines import parse_step as nemo_sc_step
from probes.logs.progress import EPISODE_BAR, iteration_seconds, sec_per_it, training_desc
from probes.logs.scan_core import metric_point
from probes.logs.scan_dicts import DictScan
from probes.logs.scan_patterns import (
    BULLET_RE,
    DS_BATCH_RE,
    DS_CHAT_EPOCH_RE,
    DS_GA_RE,
    NEMO_HEADER_RE,
    PIPE_PART_RE,
    PIPE_STEP_RE,
)
from probes.logs.slime_lines import parse_slime
from probes.logs.titan_lines import parse_titan_step, titan_total

ITER_TIMES_KEPT = 64
_PRIME_TIME_RE = re.compile(r"^(\d{1,9}(?:\.\d{1,3})?)(ms|s)$|^(\d{1,9})([dhm]) (\d{1,2})([hms])$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


_LOGGER_PAIR_RE = re.compile(r"([A-Za-z_][\w/.\-]{0,63}):(\S{1,64})(?:\s|$)")
"""One ``name:value`` of torchtune's ``StdoutLogger`` line (``Step N | loss:1.23 lr:2e-05
tokens_per_second_per_gpu:1234.5 ``: ``print(f"{name}:{data} ", end="")`` per metric)."""


def _logger_pairs(text: str) -> dict[str, float]:
    """The numeric ``name:value`` pairs of a ``Step N | ...`` line's one part (torchtune's
    ``StdoutLogger``); an empty dict if the part holds none."""
    values: dict[str, float] = {}
    for name, raw in _LOGGER_PAIR_RE.findall(text):
        number = parse_number(raw)
        if number is not None:
            values[name] = number
    return values


def _prime_seconds(text: str) -> float | None:
    """prime-rl's ``format_time`` (``850ms``, ``12.3s``, ``1m 2s``, ``3h 4m``, ``1d 2h``) in
    seconds, None for any other text."""
    found = _PRIME_TIME_RE.match(text)
    if found is None:
        return None
    if found.group(1):
        return float(found.group(1)) * _UNIT_S[found.group(2)]
    return (int(found.group(3)) * _UNIT_S[found.group(4)]
            + int(found.group(5)) * _UNIT_S[found.group(6)])


OPENRLHF_UNSTEPPED = "openrlhf-microbatches"
"""The format mark of an OpenRLHF SFT/DPO/RM step bar read with no gradient accumulation known:
training, at an optimizer step the log does not tell (``report.rules.buffer_rule``)."""


class StepScan(DictScan):
    """The per-format step-line readers of ``MetricScan`` (see the module)."""

    def _on_iteration(self, line: IterationLine, line_no: int, stamp: datetime | None) -> None:
        """A Megatron iteration line: its step, ``--train-iters`` total and per-iteration time."""
        self._mark(line.fmt)
        self.iter_total = line.total if line.epoch_length is None else self.epoch_steps_total(
            line.epoch_length)  # (mmengine by epochs: the config's epochs of its batches)
        per_iter = line.seconds if line.seconds is not None else iteration_seconds(line.values)
        if per_iter is not None:
            if self.iter_times and line.step <= self.iter_times[-1][0]:
                self.iter_times.clear()  # a restarted run counts again from its resume point
            self.iter_times.append((line.step, per_iter))
            del self.iter_times[:-ITER_TIMES_KEPT]
        self._record(line.step, line.values, line_no, stamp)

    def _lightning(self, body: str, line_no: int) -> None:
        """NeMo 1.x's step status in its Lightning bar's postfix (``bar_lines.lightning_status``):
        a point at its step, with its ``train_step_timing in s`` as a Megatron line's time."""
        status = lightning_status(body)
        if status is None:
            self._postfix_step(body, line_no)
            return
        step, values = status
        per_iter = iteration_seconds(values)
        if per_iter is None and "global_step=" not in body:
            # A plain Lightning bar: its rate (``rate_noinv_fmt``, tqdm's smoothed batches a
            # second) is the run's, across its epochs' bars (no stamp on a bar line).
            bar = self._bar(body)
            per_iter = sec_per_it(bar.rate) if bar is not None else None
        if per_iter is not None:
            times = self.iter_times
            if times and step < times[-1][0]:
                times.clear()  # a restarted run counts again from its resume point
            if not times or step > times[-1][0]:  # a redraw of the same step adds no time
                times.append((step, per_iter))
                del times[:-ITER_TIMES_KEPT]
        if not self._skimming:
            self._mark("nemo")
            self._record(step, values, line_no, None)

    def _postfix_step(self, body: str, line_no: int) -> None:
        """A script's training bar whose ``set_postfix`` names its loss (``bar_lines.postfix_loss``;
        not OpenRLHF's Episode bar, read by ``_episode_status``): a point at the bar's count.
        Its rate is the bar's, as for any training bar. OpenRLHF's SFT/DPO/RM bars are read
        before this (``EpisodeScan._postfix_step``)."""
        if self._skimming or "loss=" not in body:
            return
        bar = self._bar(body)
        desc = training_desc(bar.desc) if bar is not None else None
        if bar is None or desc is None or desc == EPISODE_BAR:
            return
        values = postfix_loss(body)
        if values is not None and bar.current > 0:
            self._mark("tqdm-postfix")
            self._record(bar.current, values, line_no, None)

    def _deepspeed_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """``feed`` of DeepSpeed's engine line (``_on_ds_progress``) or a DeepSpeed-Chat
        rank-0 loss line (added to ``ds_losses``); whether it was one."""
        progress = parse_ds_progress(body)
        if progress is not None:
            self._on_ds_progress(progress[0], progress[1], line_no, stamp)
            return True
        loss = parse_ds_chat_loss(body)
        if loss is None:
            return False
        if not self._skimming:
            total, count = self.ds_losses
            self.ds_losses = (total + loss, count + 1)
        return True

    def _ds_total(self, body: str) -> None:
        """DeepSpeed's ``gradient_accumulation_steps`` (its config dump) and DeepSpeed-Chat's
        ``Beginning of Epoch k/E, Total Micro Batches N``: the run's total is ``E x N // G``
        optimizer steps (the engine steps at every G-th micro-batch, counted across epochs);
        none without G (micro-batches are no count of steps)."""
        found = DS_GA_RE.search(body)
        if found is not None and int(found.group(1)) > 0:
            self.ds_accumulation = int(found.group(1))
            return
        found = DS_BATCH_RE.search(body)
        if found is not None and int(found.group(1)) > 0:
            self.ds_batch = int(found.group(1))
            return
        epoch = DS_CHAT_EPOCH_RE.match(body)
        if epoch is not None and self.ds_accumulation:
            total = int(epoch.group(1)) * int(epoch.group(2)) // self.ds_accumulation
            if total > 0:
                self.banner_total = total

    def _on_ds_progress(self, step: int, values: dict[str, float], line_no: int,
                        at: datetime | None) -> None:
        """DeepSpeed's engine line, ``[Rank 0] step=N, skipped=K, lr=[...]`` (every
        ``steps_per_print`` optimizer steps): a point at step N, its loss the mean of the
        micro-batch losses rank 0 printed since the last one (``ds_losses``), and its stamp
        the step's time (the rate from the stamps)."""
        self._mark("deepspeed")
        total, count = self.ds_losses
        if count:
            values = {**values, "loss": total / count}
            self.ds_losses = (0.0, 0)
        if step == self.top and step in self.points:
            return  # the step's own line came first (Megatron-DeepSpeed's iteration line)
        self._record(step, values, line_no, at)

    def _step_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """``feed`` of a ``Step `` line that is no SkyRL header: prime-rl's ``Step N | ...``
        or NeMo-RL's ``===== Step N/M =====``; whether it was one."""
        if " | " in body:
            piped = PIPE_STEP_RE.search(body)
            if piped is not None:
                self._on_pipe_step(int(piped.group(1)), piped.group(2), line_no, stamp)
                return True
        if STEP_GATE in body:
            areal = parse_step(body)
            if areal is not None:
                self._mark("areal")
                self.nemo, self.banner_total = (areal[0], stamp, {}), areal[1]
                return True
        if "==" in body:
            banner = NEMO_HEADER_RE.match(body)
            if banner is not None:
                self._on_nemo_header(int(banner.group(1)), int(banner.group(2)), stamp)
                return True
        return False

    def _on_pipe_step(self, step: int, text: str, line_no: int, at: datetime | None) -> None:
        """prime-rl's ``Step N | <time> | Label value | ...``: each ``Label value`` part at
        step N. Its trainer and its orchestrator both print one per step into the job's log
        (the orchestrator ahead by its async level), so a step's second line adds to the
        point of its first rather than replacing it."""
        parts = text.split(" | ")
        took = _prime_seconds(parts[0].strip())
        values: dict[str, float] = {} if took is None else {"step_time": took}
        for part in parts[1:]:
            found = PIPE_PART_RE.match(part.strip())
            if found is not None:
                values[found.group(1)] = float(found.group(2))
        fmt = "prime-rl"
        if took is None and len(parts) == 1:
            values, fmt = _logger_pairs(parts[0]), "torchtune"
        if not values:
            return
        self._mark(fmt)
        if not self._skimming:  # (the rewind before ``held``: a stale point is no half)
            self._rewind(step, strict=fmt != "prime-rl")
        held = self.points.get(step)
        self._record(step, values, line_no, at, numbered=False)
        if held is not None and not self._skimming:
            point = self.points.get(step)
            if point is not None and point is not held:
                merged = {**held.values, **point.values}
                self.points[step] = metric_point(step, merged, line_no, at or held.wall_time)

    def _nemo_markers(self, body: str) -> None:
        """NeMo-RL's epoch banner, ``max_num_steps`` and step banner (its M: the epoch's
        steps, ``NemoEpochs``: the run's total)."""
        self.nemo_epochs = self.nemo_epochs.read(body)
        if self.nemo is not None and "Saving checkpoint for step " in body:
            step, at, values = self.nemo
            self.nemo_epochs, step = self.nemo_epochs.anchored(body, step)
            self.nemo = (step, at, values)
        areal = parse_step(body) if STEP_GATE in body else None
        if areal is not None:  # AReaL's step line (NEMO_GATES: read here while skimming)
            self.banner_total = areal[1]
        banner = NEMO_HEADER_RE.match(body) if "= Step " in body else None
        if banner is not None and int(banner.group(2)) > 0:
            self.nemo_epochs = self.nemo_epochs._replace(per_epoch=int(banner.group(2)))
            self.banner_total = self.nemo_epochs.total(int(banner.group(2)))

    def _on_nemo_header(self, step: int, total: int, at: datetime | None) -> None:
        """NeMo-RL's ``===== Step N/M =====``: step N of the epoch under way opens, M is the
        epoch's steps (``NemoEpochs``; read by ``_markers`` too, which a line before the
        read-back suffix reaches)."""
        self._mark("nemo-rl")
        self.nemo = (self.nemo_epochs.step(step, total), at, {})
        if total > 0:
            self.nemo_epochs = self.nemo_epochs._replace(per_epoch=total)
            self.banner_total = self.nemo_epochs.total(total)

    def _bullet(self, body: str, line_no: int) -> bool:
        """One ``  • Label: value`` of NeMo-RL's open step (the step's point so far); whether
        the line was one."""
        bullet = BULLET_RE.match(body)
        if bullet is None or self.nemo is None:
            return False
        step, at, values = self.nemo
        values[bullet.group(1).strip()] = float(bullet.group(2))
        self._record(step, dict(values), line_no, at)
        return True

    def _table_row(self, body: str, line_no: int) -> bool:
        """One ``│ key │ value │ ...`` row of AReaL's stats table after its step line (the
        step's point so far, as NeMo-RL's bullets), in a log that printed AReaL's step line
        (a box table of another tool is no AReaL stats); whether the line was one."""
        pairs = row_pairs(body)
        if pairs is None or self.nemo is None:
            return False
        step, at, values = self.nemo
        values.update(pairs)
        self._record(step, dict(values), line_no, at)
        return True

    def _skyrl_line(self, body: str) -> bool:
        """SkyRL's reward line or policy-status line, held for its step's dict or bar (with
        the wandb logger, the only lines of its loss, entropy and grad norm); whether it was
        one."""
        reward = parse_reward_line(body) if "reward/" in body else None
        if reward is not None:
            self._mark("skyrl")
            self.pending_reward = reward
            return True
        status = parse_status_line(body) if "_loss" in body and " - {" in body else None
        if status is not None:
            self._mark("skyrl")
            self.pending_status = status
            return True
        return False

    def _on_header(self, step: int, stamp: datetime | None, inline: str | None, no: int) -> None:
        self._mark("skyrl")
        self.header = (step, stamp)
        if not self._skimming:  # the step of the batches bar's next redraw
            self.skyrl_batches = self.skyrl_batches._replace(anchor=step)
        if inline:
            self._start_dict(inline, no)

    def _pending_step(self) -> dict[str, float] | None:
        """SkyRL's step logged without a ``Step N:`` dict: its reward line and status dict."""
        if self.pending_status is None:
            return self.pending_reward
        if self.pending_reward is None:
            return self.pending_status
        return {**self.pending_reward, **self.pending_status}

    def _slime_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """slime's ``rollout R: {...}`` (held, as SkyRL's reward line is, for the steps
        trained on it) or ``step N: {...}`` (step N's metrics with its rollout's);
        ``probes.logs.slime_lines``. Whether the line was one."""
        found = parse_slime(body)
        if found is None:
            return False
        kind, number, pairs = found
        self._mark("slime")
        if kind == "rollout":
            self.pending_reward = pairs
        elif pairs:
            self._record(number, {**(self.pending_reward or {}), **pairs}, line_no, stamp)
        return True

    def _mirror_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """A ``WANDB_MIRROR kind=K step=N metrics={...}`` line (``probes.logs.mirror_lines``):
        a training payload is step N's metrics, an evaluation's is none; whether it was one."""
        mirror = parse_mirror(body)
        if mirror is None:
            return False
        kind, step, pairs = mirror
        if kind == "train" and pairs:
            self._mark("skyrl")
            self._record(step, pairs, line_no, stamp)
        return True

    def _nemo_sc_line(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """NeMo-RL's SingleController ``step_metrics={...}`` (held) or ``train step N/M``
        (step N's point, M the run's total; ``probes.logs.nemo_sc_lines``); whether it was
        one."""
        metrics = nemo_sc_metrics(body) if NEMO_SC_METRICS in body else None
        if metrics is not None:
            self.pending_sc = metrics
            return True
        step = nemo_sc_step(body) if NEMO_SC_STEP in body else None
        if step is None:
            return False
        self._mark("nemo-rl")
        self.banner_total = step[1]
        if self.pending_sc:
            self._record(step[0], self.pending_sc, line_no, stamp)
        self.pending_sc = None
        return True

    def _titan_step(self, body: str, line_no: int, stamp: datetime | None) -> bool:
        """``feed`` of a ``step:`` line that is no verl line: torchtitan's metrics line (its
        stamp is the step's time: the rate); whether it was one. A line without a loss (a
        pipeline rank's) does not replace the step's line that has one (the last stage's)."""
        titan = parse_titan_step(body)
        if titan is None:
            return False
        self._mark("torchtitan")
        step, values = titan
        if "loss" in values or step not in self.points:  # else another PP rank's line
            self._record(step, values, line_no, stamp)
        return True

    def _titan_start(self, body: str, line_no: int) -> None:
        """torchtitan's start line: a launch, and in older versions the run's total."""
        self._launched("torchtitan", line_no)
        total = titan_total(body)
        if total is not None:
            self.banner_total = total
