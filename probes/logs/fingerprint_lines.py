"""Which lines the fingerprint's readers read (``probes.logs.fingerprint``): a prefilter.

Policy: a prefilter's rule (``probes.logs.prefilter``): it may keep more lines than a reader
acts on, never fewer, so the fingerprint equals the one read from every line (the property
tests hold the two together). Lines are judged by skeleton, so a shape printed every step (an
HF metric dict) is judged once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.logs.lines import strip_ray_prefix
from probes.logs.prefilter import NeedleFilter

HEADERS = (("DeepSpeedEngine configuration", "deepspeed"), ("---- arguments ----", "megatron"))
"""A dump's header line and the trainer it names."""
READ_LINES = NeedleFilter(
    (*(mark for mark, _ in HEADERS), "{", "(", "=", " ..", "[repeated", "mage", ".sif",
     "Total train batch", "pass_at_"),
    shape=rb"^ *[a-z_][\w\-\x80-\xff]*:(?: |$)",
)
"""Every line a reader here acts on holds one of these, or is an indented ``key:`` (YAML):
a dump's first line (brace, paren, ``=``, `` ..``, a header), an image, the HF banner,
``pass_at_``; and every line whose Ray prefix or ``[repeated ...]`` tail ``strip_ray_prefix``
cuts holds ``(`` or ``[repeated``, and one whose launcher label it cuts (``0: {``,
``[rank0]:{``) ``{``. ``shape`` is ``fingerprint._YAML_RE`` on a skeleton, loosened."""
_FLAT_DICT = re.compile(rb"[ \t\r\f\v]*\{(?=[^{}\[\]()\n]*['\"])[^{}\[\]()\n]*\}[ \t\r\f\v]*")
"""A skeleton of a one-line dict with one brace pair, a quote and no other bracket: its own
first ``{`` and last ``}`` lie outside any quoted string, so ``_literal_dump`` closes it on
that line, finds one brace and skips it (a metric line). Such a line starts no dump. The
quote is looked ahead for once: a ``[^..]*`` on each side of it tried every quote of a line
cut inside a dict (no ``}``), each time to the line's end (2 s for a 64 KiB line)."""
_HEADER_SKELETONS = tuple(mark.lower().encode() for mark, _ in HEADERS)
_YAML_SKELETON = re.compile(rb" *[a-z_][\w\-\x80-\xff]*:(?: |$)")
"""``fingerprint._YAML_RE`` on a skeleton, loosened (``READ_LINES``' shape)."""


def _may_start(skeleton: bytes) -> bool:
    """Whether ``fingerprint._collect`` may start a dump at a line of this skeleton (whose
    body is the line itself): it holds a header, a brace and a quote (``_literal_dump``), a
    ``(`` (``_args_dump``, a ``namespace(``), an ``=`` (``_one_line``), `` ..`` (DeepSpeed's
    dotted line), or is an indented ``key:`` (``_yaml_dump``). Any other line ``_collect``
    steps over: a million ``{x`` or ``{`` lines (which ``READ_LINES`` keeps for their brace)
    cost it 1 s a MiB, walked one by one."""
    return (b"(" in skeleton or b"=" in skeleton or b" .." in skeleton
            or (b"{" in skeleton and (b"'" in skeleton or b'"' in skeleton))
            or any(mark in skeleton for mark in _HEADER_SKELETONS)
            or _YAML_SKELETON.match(skeleton) is not None)


class ReadLines:
    """The lines each reader may act on (ascending): dump starts, images, banners, pass@k."""

    def __init__(self, lines: Sequence[str], gated: bool) -> None:
        found = READ_LINES.hits(lines) if gated else None
        if found is None:
            every = range(len(lines))
            self.bodies = [strip_ray_prefix(line) for line in lines]
            self.starts: Sequence[int] = every
            self.images: Sequence[int] = every
            self.banners: Sequence[int] = every
            self.passes: Sequence[int] = every
            return
        # Each role is judged once per distinct skeleton, and its lines are found in C
        # (``Skeletons.indices``): a tail of a million kept lines is never walked line by line.
        copy, hits = found
        self.bodies = list(lines)
        stripped: set[bytes] = set()
        starts: set[bytes] = set()
        flat = _FLAT_DICT.fullmatch
        for skeleton in hits:
            if skeleton[:1] == b"(" or skeleton[-1:] == b"]" or b": {" in skeleton or (
                    b"]:{" in skeleton):  # (a launcher's rank label before a dict, too)
                stripped.add(skeleton)
            if (flat(skeleton) is None or any(mark in skeleton for mark in _HEADER_SKELETONS)
                    ) and (skeleton in stripped or _may_start(skeleton)):
                starts.add(skeleton)
        for index in copy.indices(stripped):
            self.bodies[index] = strip_ray_prefix(lines[index])
        self.starts = copy.indices(starts)
        self.images = copy.indices({s for s in hits if b"mage" in s or b".sif" in s})
        self.banners = copy.indices({s for s in hits if b"total train batch" in s})
        self.passes = copy.indices({s for s in hits if b"pass_at_" in s})
