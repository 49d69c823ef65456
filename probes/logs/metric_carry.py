"""The metric pass's state between two reads of one log: ``MetricScan`` frozen and thawed.

Policy: ``snapshot_metrics`` turns a ``MetricScan`` that has fed every line so far into a
JSON-serialisable model, ``restore_metrics`` builds the scan back (as a
``probes.logs.fold_scan.FoldScan``), so feeding the next lines to the restored scan is feeding
them to the original. It is bounded whatever the log's length:

- only the ``HISTORY_DEPTH`` steps logged last are kept as points (the summary keeps no more,
  and a re-logged step moves last either way); the steps logged before them are kept as
  intervals of step numbers (``logged``), because "was this step logged before?" decides
  whether a SkyRL reward line makes a step of its own. Runs number their steps in order, so a
  run holds a few intervals (``probes.logs.step_intervals``, which forgets the lowest past
  its bound: a reward line for a step that old would count as new).
- HF dicts waiting for a bar (``hf_unanchored``) are kept whole up to ``MAX_UNANCHORED``; past
  that the first and last halves, with the count between. With no bar ever (HF's
  ``disable_tqdm``) the last ones are numbered up to the count exactly as the whole pass does;
  a bar arriving after more than ``MAX_UNANCHORED`` bar-less dicts numbers the middle ones
  from placeholders (documented in ``probes.logs.incremental``).
- the rest is already bounded by ``MetricScan``: bar events (64 per bar), Megatron iteration
  times (64), an open multi-line dict (5000 lines), checkpoint steps (one per save).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import PrivateAttr

from probes.logs.bar_lines import TqdmBar
from probes.logs.bracket_lines import BracketStep
from probes.logs.carried import Carried, built
from probes.logs.easyr1_lines import YamlStep
from probes.logs.fold_scan import KEEP_POINTS, FoldPoints, FoldScan, PointCarry, point_carry
from probes.logs.hf_banner import HfBanner
from probes.logs.hf_cadence import HfCadence
from probes.logs.history import MetricScan
from probes.logs.nemo_rl_epochs import NemoEpochs
from probes.logs.progress import BarTrack
from probes.logs.rich_panel import MetricsPanel
from probes.logs.scan_episodes import EpisodeResume
from probes.logs.skyrl_batches import SkyrlBatches
from probes.logs.slime_lines import SlimeArgs
from probes.logs.step_intervals import Interval, StepIntervals
from probes.models import LogTime, MetricPoint

MAX_UNANCHORED = 256


class BarCarry(Carried):
    """One training bar's track: its key, redraw count, last redraw and (step, elapsed) events."""

    desc: str
    total: int
    count: int
    last: tuple[str, int, int, float | None, str] | None = None
    events: tuple[tuple[int, float], ...] = ()
    seen: int = 0
    anchored: int = 0
    first: int = 0


class MetricCarry(Carried):
    """Everything ``MetricScan`` carries from one line to the next (see the module policy)."""

    clock_last: LogTime | None = None
    engine_line: int | None = None
    engine_at: LogTime | None = None
    points: tuple[PointCarry, ...] = ()
    """The last ``KEEP_POINTS`` points, in logging order."""
    logged: tuple[Interval, ...] = ()
    """Steps logged before those points, as sorted, disjoint, inclusive intervals."""
    top: int | None = None
    launch: bool = False
    launch_kinds: tuple[str, ...] = ()
    relaunch_line: int | None = None
    """The highest step logged, a trainer start line read since the last point, the kinds
    of start line read and the line of the last one read again (``MetricScan.top``,
    ``launch``: where a restarted run's new segment begins; ``relaunch_line``)."""
    formats: tuple[str, ...] = ()
    banner_total: int | None = None
    epochs_planned: int | None = None
    """llm-foundry's printed ``max_duration: Nep`` (``MetricScan.epochs_planned``)."""
    bars: tuple[BarCarry, ...] = ()
    checkpoints: tuple[int, ...] = ()
    finished: bool = False
    header: tuple[int, LogTime | None] | None = None
    dict_lines: tuple[str, ...] | None = None
    dict_line_no: int = 0
    yaml_step: tuple[int, int, int, tuple[str, ...], dict[str, float]] | None = None
    """EasyR1's open step block (``MetricScan.yaml_step``): step, header and last line,
    keys open, metrics read."""
    panel: tuple[int, int, tuple[str, ...]] | None = None
    """open-instruct's open ``Metrics`` panel (``probes.logs.rich_panel.MetricsPanel``): top
    and last line, the inner lines read."""
    bracket_step: tuple[int, int, int, dict[str, float], bool, datetime | None] | None = None
    """A bracketed header's open block (``probes.logs.bracket_lines.BracketStep``): step,
    header and last line, metrics read, step from ``time/batch``, the header's stamp."""
    pending_reward: dict[str, float] | None = None
    pending_status: dict[str, float] | None = None
    pending_sc: dict[str, float] | None = None
    """NeMo-RL SingleController's metrics dict held for its ``train step`` line."""
    skyrl_batches: tuple[int, int | None, bool, tuple[int, ...], int, bool, bool, bool] = (
        0, None, False, (), -1, False, False, False)
    """SkyRL's batches bar's lead (``probes.logs.skyrl_batches.SkyrlBatches``)."""
    ds_losses: tuple[float, int] = (0.0, 0)
    ds_accumulation: int | None = None
    ds_batch: int | None = None
    verl_bar: tuple[int, int, int, int, str] | None = None
    """verl SFT's latest ``Epoch E/M`` redraw (``MetricScan.verl_bar``)."""
    hf_fine_epoch: bool = False
    """DeepSpeed-Chat's rank-0 losses since DeepSpeed's last engine line: sum and count."""
    hf_cadence: tuple[tuple[int, int] | None, tuple[tuple[int, int], ...] | None] = (None, None)
    """Bar-less HF dicts' inferred logging cadence (``MetricScan.hf_cadence``)."""
    nemo: tuple[int, LogTime | None, dict[str, float]] | None = None
    """NeMo-RL's open step (``MetricScan.nemo``): its banner's step, stamp and bullets."""
    nemo_epochs: tuple[int, int, int | None, int | None] = (1, 1, None, None)
    """NeMo-RL's epoch, epochs, ``max_num_steps`` and steps an epoch
    (``MetricScan.nemo_epochs``)."""
    hf_anchor: int | None = None
    hf_anchor_key: tuple[str, int] | None = None
    bar_seq: int = 0
    finish_seq: int | None = None
    hf_prev: int | None = None
    hf_head: tuple[tuple[dict[str, float], int], ...] = ()
    hf_tail: tuple[tuple[dict[str, float], int], ...] = ()
    hf_count: int = 0
    hf_banner: HfBanner = HfBanner()
    """The HF training banner and logging fields read (``probes.logs.hf_banner.HfBanner``)."""
    hf_saved: tuple[int, int] | None = None
    """The last HF checkpoint save and the dicts numbered after it (``MetricScan``'s)."""
    log_start: bool = True
    """The fold began at the log's first byte (``MetricScan.log_start``)."""
    samples: int | None = None
    batch: int | None = None
    rollout_batch: int | None = None
    resume: EpisodeResume | None = None
    """OpenRLHF's resume and its first bar (``MetricScan.resume``)."""
    episode_unanchored: bool = False
    episode_ahead: bool = False
    """OpenRLHF's Episode bar counts the run's steps plus one (``MetricScan.episode_ahead``)."""
    harbor: tuple[int, int, float | None] | None = None
    harbor_metric: str | None = None
    iter_total: int | None = None
    iter_times: tuple[tuple[int, float], ...] = ()
    config_epochs: int | None = None
    config_epoch_cap: int | None = None
    """torchtune's resolved ``epochs`` and ``max_steps_per_epoch`` (``MetricScan``'s)."""
    slime_args: tuple[int | None, int | None, int | None, int | None, int | None] = (
        None, None, None, None, None)
    """slime's printed arguments that give its total (``MetricScan.slime_args``)."""
    _live: tuple[MetricPoint, ...] | None = PrivateAttr(default=None)
    """This process only, never stored: the ``MetricPoint`` each of ``points`` was made from
    (equal to it field by field; points are replaced, never changed): a restore reuses them
    rather than building every point again."""

    def __eq__(self, other: object) -> bool:
        """The fields only (pydantic's would compare the cache too)."""
        if not isinstance(other, MetricCarry):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = Carried.__hash__


def _unanchored(scan: MetricScan) -> tuple[list[tuple[dict[str, float], int]], list[
        tuple[dict[str, float], int]], int]:
    """(head, tail, dicts in all) of the bar-less HF dicts, the middle dropped past the cap."""
    pending = scan.hf_unanchored
    head_len, gap = (scan.hf_head, scan.hf_gap) if isinstance(scan, FoldScan) else (0, 0)
    if not gap and len(pending) <= MAX_UNANCHORED:
        return list(pending), [], len(pending)
    half = MAX_UNANCHORED // 2
    if not gap:
        head_len = half
    head, tail = pending[:head_len], pending[head_len:]
    return head, tail[-half:], len(pending) + gap


def snapshot_metrics(scan: MetricScan) -> MetricCarry:
    """``scan``'s state (after ``feed``, before ``close``) as a bounded model."""
    scan.settle()  # each bar's last redraw, if fed the short way (``feed_bar``)
    points = scan.points
    logged = points.logged if isinstance(points, FoldPoints) else StepIntervals()
    if isinstance(points, FoldPoints):
        points.trim(KEEP_POINTS)
    else:
        for step in list(points)[:-KEEP_POINTS]:
            logged.add(step)
    head, tail, count = _unanchored(scan)
    live = tuple(scan.points[s] for s in list(scan.points)[-KEEP_POINTS:])
    carry_of = points.carry_of if isinstance(points, FoldPoints) else point_carry
    carry = built(  # fresh containers: the live scan goes on (its summary, the next read)
        MetricCarry,
        clock_last=scan.clock.last, engine_line=scan.engine_line, engine_at=scan.engine_at,
        points=tuple(carry_of(p) for p in live),
        logged=logged.intervals(), top=scan.top, launch=scan.launch,
        launch_kinds=tuple(sorted(scan.launch_kinds)), relaunch_line=scan.relaunch_line,
        formats=tuple(scan.formats),
        banner_total=scan.banner_total, epochs_planned=scan.epochs_planned,
        bars=tuple(_bar_carry(key, track) for key, track in scan.bars.items()),
        checkpoints=tuple(sorted(scan.checkpoints)), finished=scan.finished,
        header=scan.header,
        dict_lines=None if scan.dict_lines is None else tuple(scan.dict_lines),
        dict_line_no=scan.dict_line_no, yaml_step=_yaml_carry(scan.yaml_step),
        bracket_step=_bracket_carry(scan.yaml_step),
        panel=None if scan.panel is None else (
            scan.panel.line_no, scan.panel.last, tuple(scan.panel.rows)),
        pending_reward=None if scan.pending_reward is None else dict(scan.pending_reward),
        pending_status=None if scan.pending_status is None else dict(scan.pending_status),
        pending_sc=None if scan.pending_sc is None else dict(scan.pending_sc),
        skyrl_batches=tuple(scan.skyrl_batches),
        ds_losses=scan.ds_losses, ds_accumulation=scan.ds_accumulation, ds_batch=scan.ds_batch,
        verl_bar=scan.verl_bar,
        hf_fine_epoch=scan.hf_fine_epoch, hf_cadence=tuple(scan.hf_cadence),
        nemo=None if scan.nemo is None else (scan.nemo[0], scan.nemo[1], dict(scan.nemo[2])),
        nemo_epochs=tuple(scan.nemo_epochs),
        hf_anchor=scan.hf_anchor, hf_prev=scan.hf_prev,
        hf_anchor_key=scan.hf_anchor_key, bar_seq=scan.bar_seq, finish_seq=scan.finish_seq,
        hf_head=tuple((dict(p), n) for p, n in head),
        hf_tail=tuple((dict(p), n) for p, n in tail), hf_count=count,
        hf_banner=scan.hf_banner, hf_saved=scan.hf_saved, log_start=scan.log_start,
        samples=scan.samples, batch=scan.batch, harbor=scan.harbor,
        harbor_metric=scan.harbor_metric,
        rollout_batch=scan.rollout_batch, resume=scan.resume,
        episode_unanchored=scan.episode_unanchored, episode_ahead=scan.episode_ahead,
        iter_total=scan.iter_total, iter_times=tuple(scan.iter_times),
        config_epochs=scan.config_epochs, config_epoch_cap=scan.config_epoch_cap,
        slime_args=tuple(scan.slime_args),
    )
    carry._live = live
    return carry


def _yaml_carry(block: YamlStep | None) -> tuple[int, int, int, tuple[str, ...],
                                                  dict[str, float]] | None:
    if block is None or isinstance(block, BracketStep):
        return None
    return block.step, block.line_no, block.last, tuple(block.path), dict(block.values)


def _bracket_carry(block: YamlStep | None) -> tuple[int, int, int, dict[str, float], bool,
                                                    datetime | None] | None:
    if not isinstance(block, BracketStep):
        return None
    return block.step, block.line_no, block.last, dict(block.values), block.by_batch, block.at


def _bar_carry(key: tuple[str, int], track: BarTrack) -> BarCarry:
    last = None if track.last is None else tuple(track.last)
    return BarCarry(desc=key[0], total=key[1], count=track.count,
                    last=last, events=tuple(track.events), seen=track.seen,
                    anchored=track.anchored, first=track.first)


def restore_metrics(
    carry: MetricCarry | None, aliases: Mapping[str, str], mtime: datetime | None
) -> FoldScan:
    """A ``MetricScan`` in the state ``carry`` was taken in (a fresh one for ``None``).

    ``mtime`` is this read's: it places year-less stamps only until the log shows a stamp.
    """
    scan = FoldScan(aliases, mtime, None)
    carry = carry or MetricCarry()
    if carry.clock_last is not None:
        scan.clock.reference = scan.clock.last = carry.clock_last
    scan.engine_line, scan.engine_at = carry.engine_line, carry.engine_at
    scan.points = FoldPoints(carry.points, StepIntervals(carry.logged), carry._live)
    scan.top, scan.launch = carry.top, carry.launch
    scan.launch_kinds, scan.relaunch_line = frozenset(carry.launch_kinds), carry.relaunch_line
    scan.formats = dict.fromkeys(carry.formats)
    scan.banner_total, scan.epochs_planned = carry.banner_total, carry.epochs_planned
    _restore_bars(scan, carry)
    scan.checkpoints = set(carry.checkpoints)
    scan.finished = carry.finished
    _restore_pending(scan, carry)
    _restore_hf(scan, carry)
    scan.samples, scan.batch, scan.harbor = carry.samples, carry.batch, carry.harbor
    scan.harbor_metric = carry.harbor_metric
    scan.rollout_batch, scan.resume = carry.rollout_batch, carry.resume
    scan.episode_unanchored, scan.episode_ahead = carry.episode_unanchored, carry.episode_ahead
    scan.iter_total, scan.iter_times = carry.iter_total, list(carry.iter_times)
    scan.config_epochs, scan.config_epoch_cap = carry.config_epochs, carry.config_epoch_cap
    scan.slime_args = SlimeArgs(*carry.slime_args)
    return scan


def _restore_bars(scan: FoldScan, carry: MetricCarry) -> None:
    """Restore the progress bars' tracks onto ``scan``."""
    for bar in carry.bars:
        track = BarTrack()
        track.count = bar.count
        track.last = None if bar.last is None else TqdmBar(*bar.last)
        track.events = list(bar.events)
        track.seen, track.anchored, track.first = bar.seen, bar.anchored, bar.first
        scan.bars[(bar.desc, bar.total)] = track


def _restore_pending(scan: FoldScan, carry: MetricCarry) -> None:
    """Restore what a step's lines left half-read (a dict, a YAML step, reward or status
    lines, DeepSpeed losses, NeMo's step) onto ``scan``: copies, the scan mutates them."""
    scan.header = carry.header
    scan.dict_lines = None if carry.dict_lines is None else list(carry.dict_lines)
    scan.dict_line_no = carry.dict_line_no
    if carry.yaml_step is not None:
        step, line_no, last, path, values = carry.yaml_step
        scan.yaml_step = YamlStep(step, line_no, last, list(path), dict(values))
    if carry.panel is not None:
        scan.panel = MetricsPanel(carry.panel[0], carry.panel[1], list(carry.panel[2]))
    if carry.bracket_step is not None:
        step, line_no, last, read, by_batch, at = carry.bracket_step
        scan.yaml_step = BracketStep(step, line_no, last, dict(read), by_batch=by_batch, at=at)
    scan.pending_reward = None if carry.pending_reward is None else dict(carry.pending_reward)
    scan.pending_status = None if carry.pending_status is None else dict(carry.pending_status)
    scan.pending_sc = None if carry.pending_sc is None else dict(carry.pending_sc)
    scan.skyrl_batches = SkyrlBatches(*carry.skyrl_batches)
    scan.ds_losses, scan.ds_accumulation = carry.ds_losses, carry.ds_accumulation
    scan.ds_batch, scan.verl_bar = carry.ds_batch, carry.verl_bar
    scan.hf_fine_epoch = carry.hf_fine_epoch
    scan.hf_cadence = HfCadence(*carry.hf_cadence)
    scan.nemo = None if carry.nemo is None else (carry.nemo[0], carry.nemo[1], dict(carry.nemo[2]))
    scan.nemo_epochs = NemoEpochs(*carry.nemo_epochs)


def _restore_hf(scan: FoldScan, carry: MetricCarry) -> None:
    """Restore HF Trainer's dict anchoring (anchor, the dicts no bar numbered yet, banner)
    onto ``scan``."""
    scan.hf_anchor, scan.hf_prev = carry.hf_anchor, carry.hf_prev
    scan.hf_anchor_key, scan.bar_seq = carry.hf_anchor_key, carry.bar_seq
    scan.finish_seq = carry.finish_seq
    scan.hf_unanchored = [(dict(p), n) for p, n in (*carry.hf_head, *carry.hf_tail)]
    scan.hf_banner, scan.hf_saved, scan.log_start = carry.hf_banner, carry.hf_saved, \
        carry.log_start
    if carry.hf_tail:
        scan.hf_head = len(carry.hf_head)
        scan.hf_gap = carry.hf_count - len(carry.hf_head) - len(carry.hf_tail)
