"""The one signal a catch-all job's log ends on: pytest's tally, or what an upload pushed.

Policy (seed §Catch-all: "the one signal that matters"): read from the end of the tail, the last
match wins.

- pytest's closing summary ``===== 2 passed, 1 warning in 3.21s =====`` gives ``2 passed, 1
  warning`` (the duration is dropped: it is not the signal); ``no tests ran`` counts too.
- An upload names its target: ``huggingface-cli upload`` / ``huggingface_hub`` commit URLs
  (``https://huggingface.co/<repo>/commit/...`` or ``.../tree/...``), ``aws s3 cp``'s
  ``upload: <src> to s3://...``, ``gsutil``/``gcloud storage`` ``Copying ... [Content-Type...]``
  to ``gs://...``, ``git push``'s ``To <remote>``, and the ``push_to_hub``/"pushing N rows ->
  <dataset>" lines scripts print; ``huggingface-cli upload <repo>`` / ``hf upload <repo>``
  command lines (a running upload names its repo before any URL is printed). The count of
  rows/files/shards on that line comes along.
Never raises; every capture is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from probes.logs.prefilter import NeedleFilter
from probes.models import LogOutcome

_PYTEST_RE = re.compile(
    r"^=+ ((?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)"
    r"(?:, )?)+|no tests ran)(?: in [\d.]+s(?: \([^)]{0,40}\))?)? =+$"
)
_COUNT = r"(\d[\d,._]{0,15}[kKmM]? (?:rows|files|shards|records|examples|samples|checkpoints?))"
_PUSH_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)\bpush(?:ed|ing)?\b.{0,40}?" + _COUNT + r".{0,20}?(?:->|→|to) ?(\S{1,200})"),
    re.compile(r"\bupload: \S{1,300} to ((?:s3|gs)://\S{1,300})"),
    re.compile(r"(?:^|\s)(?:https?://)?((?:huggingface\.co|hf\.co)/(?:datasets/)?"
               r"[\w.\-]{1,96}/[\w.\-]{1,96})/(?:commit|tree|blob)/"),
    re.compile(r"(?i)\bupload(?:ed|ing)?\b.{0,200}?\bto ((?:s3|gs|az)://\S{1,300})"),
    re.compile(r"(?i)\bpush(?:ed|ing)? (?:\S{1,80} )?to (?:the )?(?:hub|repo(?:sitory)?)[: ]+"
               r"(\S{1,200})"),
    re.compile(r"^To ((?:https?://|git@|ssh://)\S{1,300})$"),
    # The Hub CLI's own command line (echoed by ``set -x`` or the script): its repo id is the
    # first argument, after any options; a local path (``ckpt/step_400/hf``) is not one.
    re.compile(r"(?:^|[\s+])(?:huggingface-cli|hf) upload"
               r"(?: --?[\w-]{1,30}(?:[= ](?!-)[^\s/]{1,80})?){0,8}"
               r" ([\w.\-]{1,96}/[\w.\-]{1,96})(?=\s|$)"),
)


_PUSH_WORDS = ("push", "upload", "huggingface.co", "hf.co", "to ")
OUTCOME_GATE = _OUTCOME_LINES = NeedleFilter(("=", *_PUSH_WORDS))
"""A pytest summary holds ``=``, an upload line one of ``_pushed``'s words: no other line
says anything here."""


def read_outcome(
    lines: Sequence[str], *, gated: bool = True, last: int | None = None,
) -> LogOutcome | None:
    """pytest's last summary and the last upload target in ``lines`` (None if neither);
    ``last``: in its last ``last`` lines only (``lines[-last:]``, without the copy).

    ``gated``: only the lines ``_OUTCOME_LINES`` keeps are read (the tests compare both)."""
    pytest: str | None = None
    pushed: str | None = None
    start = 0 if last is None else max(0, len(lines) - last)
    kept = _OUTCOME_LINES.lines(lines, start) if gated else None
    if kept is None:
        read: Iterable[str] = (lines[i] for i in range(len(lines) - 1, start - 1, -1))
    else:
        read = (lines[start + i] for i in reversed(kept))
    for line in read:
        text = line.strip()
        if not text:
            continue
        if pytest is None and text.startswith("=") and text.endswith("="):
            found = _PYTEST_RE.match(text)
            if found is not None:
                pytest = found.group(1).rstrip(", ")
        if pushed is None:
            pushed = _pushed(text)
        if pytest is not None and pushed is not None:
            break
    if pytest is None and pushed is None:
        return None
    return LogOutcome(pytest_summary=pytest, pushed=pushed)


def _pushed(text: str) -> str | None:
    lowered = text.lower()
    if not any(word in lowered for word in _PUSH_WORDS):
        return None
    for pattern in _PUSH_RES:
        found = pattern.search(text)
        if found is None:
            continue
        groups = [g for g in found.groups() if g]
        target = groups[-1].rstrip(".,;")
        return f"{groups[0]} → {target}" if len(groups) > 1 else target
    return None
