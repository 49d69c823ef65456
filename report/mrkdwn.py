"""Outside text made safe for Slack's mrkdwn: escaped, unable to format, unable to close a
code block or span.

Policy (as :mod:`report.chunks` states it): :func:`escape_mrkdwn` is the one escape for text
that came from a cluster or a user: ``&``, ``<`` and ``>`` become entities everywhere, code
blocks included, so nothing outside the bot can write a mention (``<!channel>``, ``<@U…>``)
or a link; a fence becomes look-alikes. Inside a code block or span a backtick becomes the
look-alike ``ˋ`` (same width). mrkdwn has no escape for ``*`` ``_`` ``~``: outside words that
would format with them are set in inline code spans (:func:`unformatted`, :func:`inert`).
"""

from __future__ import annotations

import re

from report.cells import printable

FENCE = "```"
BACKTICK_LOOKALIKE = "ˋ"
_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))  # "&" first: it starts the others


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters; a fence
    (```` ``` ````) from outside the bot becomes look-alikes so it cannot open a code block;
    control and format characters (ESC, a bidi override, a zero-width space: a job name that
    would read as another) become spaces, line breaks kept, as in the tables."""
    if not text.isprintable() and not all(map(str.isprintable, text.split("\n"))):
        text = printable(text)  # (one C pass, a line at a time for a multi-line text)
    # Each replace behind a test: ``in`` finds a character fast, where a replace that finds
    # nothing still costs a slow pass (a 5,000-row table: 1.5 ms against 0.03 ms).
    for char, entity in _ENTITIES:
        if char in text:
            text = text.replace(char, entity)
    return text.replace(FENCE, BACKTICK_LOOKALIKE * 3) if "`" in text else text


def no_backticks(text: str) -> str:
    """Every backtick a look-alike: text that cannot close a code span or fence (escape for
    mrkdwn separately, or use ``escape_code``)."""
    return text.replace("`", BACKTICK_LOOKALIKE) if "`" in text else text


def escape_code(text: str) -> str:
    """Text for inside a code block or span: escaped, and no backtick left to close it."""
    return no_backticks(escape_mrkdwn(text))


_FORMATTING = frozenset("*_~")


def strong(text: str) -> str:
    """Escaped outside text (a job name) set off as the bot's mrkdwn: bold, or an inline code
    span when it holds a character mrkdwn formats with (``*`` ``_`` ``~``) or would not bold
    (an edge space). mrkdwn has no escape for them: ``*rl*grpo*`` bolds ``rl`` and leaves
    ``grpo*``, ``*_tmp_run*`` turns italic; a code span shows every character as it is."""
    if not text:
        return "—"
    if _FORMATTING.isdisjoint(text) and text == text.strip():
        return f"*{text}*"
    return f"`{no_backticks(text)}`"


_WORD = re.compile(r"[^\s`]+")
_EDGE_PUNCT = "([{\"'.,:;!?)]}"


def _marked(match: re.Match[str]) -> str:
    """A word with ``*`` ``_`` or ``~`` at an edge (past any punctuation) in a code span:
    mrkdwn formats from such edges only (``_tmp_run_``, ``*all*``), never ``grad_norm``."""
    word = match.group()
    bare = word.strip(_EDGE_PUNCT) or word
    if bare[0] in _FORMATTING or bare[-1] in _FORMATTING or word[0] in _FORMATTING \
            or word[-1] in _FORMATTING:
        return f"`{word}`"
    return word


def unformatted(text: str) -> str:
    """Raw outside text (a job name, a user, a path, a log line, a reason quoting them) that
    can apply no mrkdwn formatting once escaped (``escape_mrkdwn``) beside the bot's own: no
    backtick of its own (it cannot pair with the bot's spans), and each word opening or
    closing with ``*`` ``_`` or ``~`` set in an inline code span, where mrkdwn formats
    nothing. mrkdwn has no escape for them: a reason quoting ``_tmp_run_`` turned italic,
    ``*all* ranks`` bold. Other words (``grad_norm``) stay plain, line breaks kept."""
    text = no_backticks(text)
    if _FORMATTING.isdisjoint(text):
        return text
    return _WORD.sub(_marked, text)


_SPAN = re.compile(r"(`[^`\n]*`)")


def unformatted_beside_spans(text: str) -> str:
    """:func:`unformatted` for raw text holding the bot's own inline spans (an error that
    names ``/job``) around outside text that has no backtick: the spans are kept, the words
    between them set off as there."""
    if _FORMATTING.isdisjoint(text):
        return text
    return "".join(part if i % 2 else _WORD.sub(_marked, part)
                   for i, part in enumerate(_SPAN.split(text)))


def inert(text: str) -> str:
    """:func:`unformatted`, escaped: outside text ready for the bot's mrkdwn."""
    return unformatted(escape_mrkdwn(text))
