"""Turns of an installed agent's Harbor trial, counted in its ATIF ``agent/trajectory.json``.

Policy: STANDARD LIBRARY ONLY (``re``) and self-contained, with no ``from __future__`` import
and only quoted annotations: shipped to the login node with ``harbor_reduce`` and run by
whatever ``python3`` it has (3.6 or newer). Nothing here raises on bad input.

Only terminus-2 counts its turns in the trial's result.json (``agent_result.metadata.
n_episodes``). Every agent Harbor installs (claude-code, openhands, codex, gemini-cli,
mini-swe-agent, ...: ``SUPPORTS_ATIF``) leaves ``metadata`` null and writes its run, turn by
turn, as ATIF steps to ``<trial>/agent/trajectory.json`` (``populate_context_post_run``), its
tokens copied from the trajectory's ``final_metrics``. A turn is a step of the trajectory's own
``steps`` whose ``source`` is ``agent``, as Harbor's rewardkit counts them
(``count_agent_turns``): the system prompt and the user's instruction are steps too, and a
subagent's trajectory embedded below is not the agent's turns.

The document is skimmed, never parsed: a JSON string (messages, tool output: nearly all of its
bytes) is stepped over by one regex match, so the cost is its structure, a few dozen tokens a
step, not its size, and nothing is built. A document that does not close (cut off mid-write)
or has no top-level ``steps`` array tells nothing (``None``), and so does one of more than
``MAX_TOKENS`` tokens.
"""

import re

MAX_TOKENS = 500000
"""Tokens skimmed at most (strings, brackets and the runs between them): ~0.3 s of CPU. A
trajectory of a thousand steps is under a tenth of it; more is no trajectory Harbor wrote."""

_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|[^"\[\]{}]+', re.S)


def agent_turns(raw: bytes) -> "int | None":
    """Steps of the top-level ``steps`` array whose ``source`` is ``agent``; ``None`` when
    ``raw`` is no whole ATIF document (see the module's policy)."""
    depth = 0
    steps_at = 0  # the depth of the top-level steps array while it is open, else 0
    found = closed = False
    turns = 0
    # the two tokens before this one: a value is a string after a ':' after its key
    before = after = b""
    pos = 0
    for count, token in enumerate(_TOKEN.finditer(raw)):
        text = token.group()
        if count >= MAX_TOKENS or token.start() != pos:
            return None  # too long, or a string that never closes
        pos = token.end()
        first = text[:1]
        if closed or depth == 0:
            if first != b"{" and text.strip():
                return None  # the document is one object, with only space around it
            if closed and text.strip():
                return None
        if first in b"[{":
            if (first == b"[" and depth == 1 and not found and after.strip() == b":"
                    and before == b'"steps"'):
                steps_at, found = 2, True
            depth += 1
        elif first in b"]}":
            depth -= 1
            if depth < 0:
                return None
            closed = depth == 0
            if steps_at and depth < steps_at:
                steps_at = 0
        elif (first == b'"' and steps_at and depth == steps_at + 1
              and after.strip() == b":" and before == b'"source"' and text == b'"agent"'):
            turns += 1
        before, after = after, text
    if pos != len(raw) or not closed or not found:
        return None
    return turns
