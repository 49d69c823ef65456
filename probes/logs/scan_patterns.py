"""The line shapes ``MetricScan`` reads (``probes.logs.history``): each format's regex and
the substring gates that guard it.

Policy: a regex runs only on a line holding its gate (a cheap ``in`` test). ``MARKER_GATES``
names every gate of ``MetricScan._markers`` and ``METRIC_LINES`` every line ``feed`` acts on,
so a line holding none is skipped whole (``probes.logs.parse`` and ``probes.logs.recent``
prefilter on them).
"""

from __future__ import annotations

import re

from probes.logs.areal_lines import ROW_GATE, STEP_GATE
from probes.logs.bar_lines import BAR_SHAPE
from probes.logs.bracket_lines import BLOCK_SHAPE, BRACKET_GATES, DURATION_GATE
from probes.logs.easyr1_lines import YAML_SHAPE
from probes.logs.harbor_progress import ROW_SHAPE
from probes.logs.lines import MMENGINE_EPOCH_GATE, MMENGINE_GATE
from probes.logs.litgpt_lines import LITGPT_GATE
from probes.logs.nemo_rl_epochs import EPOCH_GATES
from probes.logs.pair_lines import MAXTEXT_STEPS, PAIRS_GATES
from probes.logs.prefilter import NeedleFilter
from probes.logs.rich_panel import PANEL_GATES
from probes.logs.skyrl_batches import REGENERATE_GATE, RESAMPLE_GATE
from probes.logs.slime_lines import ARGS_GATE
from probes.logs.titan_lines import TITAN_FINISH, TITAN_INIT, TITAN_START

SKYRL_HEADER_RE = re.compile(r"\bStep (\d{1,12}):\s*(\{.*)?$")
BANNER_RE = re.compile(
    r"Total optimization steps = ([\d,]{1,20})|Total training steps: ?(\d{1,12})"
    r"|Number of steps/epoch \d{1,12}, number of epochs \d{1,6}, total number of steps (\d{1,12})"
    r"|\btotal_train_steps (\d{1,12})\s*$"
)
"""A trainer's start-up total: HF Trainer's banner (group 1), verl's and SkyRL's ``Total training
steps: N`` (2), verl's FSDP SFT trainer's rank-0 ``print`` (3: its ``Total training steps``
goes through a logger at WARN, this line is what a real log shows), and verl's fully-async
trainer's ``total_train_steps N`` (4: its parameter versions, the ``step:N`` it logs)."""
BANNER_GATES = ("Total", "total number of steps ", "total_train_steps ")
VERL_SFT_STEPS = "verl-sft-steps"
"""The format mark of verl's FSDP SFT steps line (``BANNER_RE`` group 3): a total that does not
count ``trainer.total_training_steps`` (``probes.logs.config_total.capped_total``)."""


def banner_steps(found: re.Match[str]) -> int:
    """The total a ``BANNER_RE`` match names."""
    return int((found.group(1) or found.group(2) or found.group(3) or found.group(4))
               .replace(",", ""))

CHECKPOINT_RE = re.compile(
    r"(?i)(?:\bsav(?:ed|ing|e)\b.{0,300}?|local_global_step_folder:\s*\S{0,300}?)"
    r"(?:global_step_|checkpoint-|/step_)(\d{1,12})"
    r"|(?i:sav(?:ed|ing) checkpoint)\b.{0,80}?\bstep[ _=:]{0,3}(\d{1,12})"
)
SAMPLES_RE = re.compile(r"\bn_samples_per_prompt['\"]?\s*[:=]\s*(\d{1,6})")
BATCH_RE = re.compile(r"(?<![\w.])train_batch_size['\"]?\s*[:=]\s*(\d{1,9})")
ROLLOUT_BATCH_RE = re.compile(r"(?<![\w.])rollout_batch_size['\"]?\s*[:= ]\s*(\d{1,9})\b")
"""OpenRLHF's ``rollout_batch_size`` (prompts a step): its args ``Namespace(...,
rollout_batch_size=16, ...)`` (0.7.5+ print it), a launch line's ``--rollout_batch_size 16``,
a JSON or YAML config."""
CONSUMED_RE = re.compile(r"(?:^|, )consumed_samples: (\d{1,15})\s*$")
"""OpenRLHF's resume line: ``consumed_samples: N`` (0.7.5 to 0.8.0, the actor's
``strategy.print``) or ``Loaded the checkpoint: <path>, consumed_samples: N`` (before): the
prompts the restored checkpoint had consumed (``EpisodeResume``)."""
GLOBAL_STEP_RE = re.compile(r"\bGlobal step (\d{1,12}): (\{.*\})\s*$")
"""OpenRLHF >= 0.8.5's per-step line, ``logger.info(f"✨ Global step {steps}: {status}")`` (its
async trainer's without the sparkle): the step and its status dict."""
NEMO_HEADER_RE = re.compile(r"^\s{0,8}={3,40} Step (\d{1,12})/(\d{1,12}) ={3,40}\s*$")
"""NeMo-RL's step banner, ``print(f"\\n{'=' * 25} Step {step + 1}/{total} {'=' * 25}")`` (GRPO,
SFT, DPO): the step whose ``📊 Training Results:`` bullets follow, and the run's total steps
(``min(len(dataloader), max_num_steps)``: optimizer steps, never examples)."""
BULLET_RE = re.compile(
    r"^\s{0,12}\u2022 ([A-Za-z][\w .()/-]{0,63}?): "
    r"([-+]?(?:\d{1,32}(?:\.\d{0,32})?(?:[eE][-+]?\d{1,4})?|nan|inf))(?:s\b|\s|$)")
"""One NeMo-RL result bullet, ``  • Loss: 0.0123`` / ``  • Avg Reward: 0.4375`` / ``  • Total
step time: 120.50s``: its label and number (a label a trainer prints, mapped by
``metric_names``; unknown labels are dropped there)."""
PIPE_STEP_RE = re.compile(r"(?:^|[\s\]:])Step (\d{1,12}) \| (.{1,2000})$")
"""prime-rl's per-step line (trainer ``Step N | 12.3s | Loss 0.01 | Entropy 0.5 | ...``,
orchestrator ``Step N | 1m 2s | Reward 0.41 | ...``), after loguru's ``HH:mm:ss LEVEL``."""
PIPE_PART_RE = re.compile(
    r"^([A-Za-z][A-Za-z .\-]{0,40}?) ([-+]?(?:\d{1,32}(?:\.\d{0,32})?(?:e[-+]?\d{1,4})?|nan|inf))"
    r"(?:%| [A-Za-z/]{1,12})?$")
"""One ``Label value[%| unit]`` part of a prime-rl step line (``Grad. Norm 0.2345``, ``LR
1.00e-06``, ``MFU 12.3%``); a part holding more (``Trainable 10/12 (83.3%)``) is no metric."""
LOOP_TOTAL_RE = re.compile(
    r"Starting (?:training|orchestrator) loop "
    r"(?:\((?:config\.)?(?:max|total)_steps=(\d{1,12})\b|with (\d{1,12}) steps\b)")
"""prime-rl's run total, logged once as each loop starts: ``Starting training loop
(max_steps=N)`` (trainer; ``infinite`` without one) and ``Starting orchestrator loop
(max_steps=N)``; older commits ``({config.max_steps=})``, ``(max_steps=N, steps_per_epoch=M)``,
the SFT trainer's ``({total_steps=}, ...)`` or ``with N steps (...)``."""
LOOP_GATES = ("training loop", "orchestrator loop")
HF_NUM_RE = re.compile(r"\bNum (examples|Epochs|update steps per epoch) = ([\d,]{1,32})\s*$")
"""HF Trainer's training banner (``Num examples``, ``Num Epochs``, transformers 5's ``Num update
steps per epoch``); an eval banner prints ``Num examples`` too, then ``Batch size``."""
HF_SAVE_RE = re.compile(r"Saving model checkpoint to \S{0,1000}?checkpoint-(\d{1,12})/?\s*$")
"""HF Trainer's one line per save (``trainer.py``'s ``_save``), printed after that step's
dict: the absolute step of the dicts about it (``MetricScan._on_hf_save``)."""
HF_BATCH_RE = re.compile(r"\bTotal train batch size\b[^=\n]{0,80}= ([\d,]{1,20})\s*$")
BATCH_GATES = ("Total train batch size", "Total batch size (")
"""HF's banner line of the total batch size, and Unsloth's (``unsloth_lines``)."""
LOGGING_RE = re.compile(
    r"(?<![\w.])(logging_steps|logging_first_step|logging_strategy)['\"]?\s{0,8}[:=]\s{0,8}"
    r"['\"]?([\w.+-]{1,48})"
)
"""``TrainingArguments``' logging fields as its repr (``logging_steps=10,``), a YAML or JSON
config or a Namespace prints them."""
EPOCH_CONFIG_RE = re.compile(r"^(epochs|max_steps_per_epoch): (\d{1,9}|null)\s*$")
"""torchtune's resolved config, logged at start-up (``config.log_config``: ``Running <Recipe>
with resolved config:`` then ``OmegaConf.to_yaml``, its top-level keys at column 0): the
epochs and the cap on steps a epoch that, with its bar's total (steps a epoch), give the run's
total optimization steps."""
MAX_EPOCHS_RE = re.compile(r"\bmax_epochs ?= ?(\d{1,9})(?![\d.])")
"""An mmengine runner's config, logged at start-up (``runner.py``: ``Config:`` then
``cfg.pretty_text``): ``train_cfg = dict(by_epoch=True, max_epochs=3, val_interval=1)``, the
epochs that, with the batches of an epoch its ``Epoch(train) [e][i/n]`` lines print, give the
run's total."""
EPOCH_CONFIG_GATES = ("epochs: ", "max_steps_per_epoch: ", "max_epochs")
DS_GA_RE = re.compile(r"\] {1,4}gradient_accumulation_steps \.{0,40} ?(\d{1,9})\s*$")
"""DeepSpeed's engine config dump at start-up, rank 0 (deepspeed/runtime/config.py ``print``:
``logger.info("  {} {} {}".format(arg, "." * (29 - len(arg)), value))``): the micro-batches
of one optimizer step."""
DS_BATCH_RE = re.compile(r"\] {1,4}train_batch_size \.{0,40} ?(\d{1,12})\s*$")
"""The same dump's ``train_batch_size``: the samples of one optimizer step (OpenRLHF's
``consumed_samples`` over it are the steps a resumed run had done)."""
DS_CHAT_EPOCH_RE = re.compile(
    r"^\s{0,8}Beginning of Epoch \d{1,6}/(\d{1,6}), Total Micro Batches (\d{1,12})\s*$")
"""DeepSpeed-Chat's epoch banner (its training mains' ``print_rank_0``): the epochs and a
rank's micro-batches a epoch (``len(train_dataloader)``)."""
DS_GATES = ("gradient_accumulation_steps", "Total Micro Batches", "train_batch_size ")
LIGHTNING_STOPS = ("` stopped: `max_steps=", "` stopped: `max_epochs=")
"""PyTorch Lightning's fit loop at its limit (``rank_zero_info(f"`Trainer.fit` stopped:
`max_steps={self.max_steps!r}` reached.")``, likewise ``max_epochs``): trained to its end (a
stop by ``max_time`` or a signal prints neither). Logged to stderr right after the bar's last
redraw, which ends in no newline: mostly on a bar's line (``finish_marks``)."""
FINISH_MARKS = ("Training done!", "Reached max_training_steps", "Final validation metrics",
                "Max number of steps has been reached", *LIGHTNING_STOPS, TITAN_FINISH)
"""A trainer's own line that it finished: SkyRL's two, verl's, NeMo-RL's (its loop's return on
``max_num_steps``, which in a later epoch comes before its per-epoch banner's total)."""
FINISH_FORMATS = {"Final validation metrics": "verl",
                   "Max number of steps has been reached": "nemo-rl",
                   **dict.fromkeys(LIGHTNING_STOPS, "nemo"), TITAN_FINISH: "torchtitan"}
MARKER_GATES = (
    *BANNER_GATES, "heckpoint", "global_step_", "Mean:", "Running trials", "train_batch_size",
    "consumed_samples: ", "rollout_batch_size",
    "n_samples_per_prompt", "Num ", "logging_", "= Step ", *EPOCH_CONFIG_GATES, *FINISH_MARKS,
    *EPOCH_GATES, STEP_GATE,
    "effective maximum steps", *LOOP_GATES, *DS_GATES, TITAN_START, TITAN_INIT, ARGS_GATE,
    DURATION_GATE, MAXTEXT_STEPS, RESAMPLE_GATE, REGENERATE_GATE,
)
"""The substring gates of ``MetricScan._markers``: a line holding none of them marks nothing."""
LAUNCH_LOOPS = ("Starting training loop", "Starting orchestrator loop")
"""prime-rl's start lines (``_launched``: each its own kind)."""
VERL_EPOCH_RE = re.compile(r"Epoch (\d{1,6})/(\d{1,6})")
"""verl's SFT trainers' bar desc, ``f"Epoch {epoch + 1}/{total_epochs}"`` (``fullmatch``)."""
SKYRL_BARS = ("Training Batches Processed", "Training Step Progress")
"""SkyRL's training bar: its trainer's, its fully-async trainer's (``fully_async_trainer.py``)."""
METRIC_LINES = NeedleFilter(
    (
        *("step:", "Step ", "reward/", *BANNER_GATES, "heckpoint", "global_step_", "Mean:"),
        *("Running trials", "train_batch_size", "n_samples_per_prompt", *FINISH_MARKS),
        *("consumed_samples: ", "rollout_batch_size", *LOOP_GATES),
        *("Num ", "logging_", *EPOCH_CONFIG_GATES, "effective maximum steps", *EPOCH_GATES),
        *(STEP_GATE, ROW_GATE),
        *("{", "'", '"', " ::", "T::", "iteration", MMENGINE_GATE, MMENGINE_EPOCH_GATE, "\u2022 "),
        *("] step=", ", rank: ", *DS_GATES, TITAN_START, TITAN_INIT, ARGS_GATE),
        *BRACKET_GATES, DURATION_GATE, LITGPT_GATE, MAXTEXT_STEPS, *PAIRS_GATES, *PANEL_GATES,
        RESAMPLE_GATE, REGENERATE_GATE,
    ),
    unicode_digits=True,
    # Harbor's row named for a metric other than its Mean; EasyR1's YAML step block; a
    # bracketed header's metric lines (Composer's, OLMo's); a line that may hold a bar (a
    # "%|" needle also kept lines that only look like one: 2.5 s a MiB of "x%|" lines)
    shape=ROW_SHAPE + b"|" + YAML_SHAPE + b"|" + BLOCK_SHAPE + b"|" + BAR_SHAPE,
)
"""Every line ``MetricScan.feed`` acts on holds one of these: a substring gate of ``feed``, a
dict's brace or quoted key, or a timestamp's ``[ T]HH:MM:SS`` (every form ``read_stamp`` reads
has one), which is `` ::`` or ``T::`` once the prefilter deletes digits; or, by its shape, a
progress bar's line (``probes.logs.bar_lines.BAR_SHAPE``: ``feed``'s ``%|`` gate reads nothing
on any other line), a line of EasyR1's YAML step block (``probes.logs.easyr1_lines.YAML_SHAPE``)
or of a bracketed header's block (``probes.logs.bracket_lines``: its header by
``BRACKET_GATES``, its lines by ``BLOCK_SHAPE``)."""
NEMO_GATES = ("= Step ", *EPOCH_GATES, STEP_GATE)
"""``_nemo_markers``' gates: NeMo-RL's step and epoch banners, config, checkpoint saves."""
NEMO_MAX_STEPS_RE = re.compile(r"\(effective maximum steps = (\d{1,12})\)")
"""NeMo's scheduler line, ``... will be used during training (effective maximum steps = N) -``
(nemo/core/optim/lr_scheduler.py): the run's ``max_steps``."""
