"""Measures of generated text for the deep probe: noise share, repetition, compression, overlap.

Policy: pure functions over strings, no I/O; ``quote`` is how every piece of sample text is
shown in a reason (control characters escaped as ``\\xNN``, quotes escaped, cut with ``…``).
"""

from __future__ import annotations

import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable

QUOTE_CHARS = 80
_OK_CONTROL = frozenset("\n\t\r")


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``"..."`` with control characters escaped and the text cut to ``limit`` characters."""
    out = []
    for ch in text[:limit]:
        if ch in _OK_CONTROL:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        elif ch == '"':
            out.append('\\"')
        else:
            out.append(ch)
    return '"' + "".join(out) + ("…" if len(text) > limit else "") + '"'


def bad_char_share(text: str, *, masked: str = "") -> float:
    """Share of characters that are replacement characters or non-printable controls.

    ``masked`` names a character that stands for such a byte in this text: the sweep's log tails
    arrive with control bytes and U+FFFD shown as ``?`` (``probes.remote.collector``), so for
    samples read from a log ``?`` counts as unshowable too.
    """
    if not text:
        return 0.0
    bad = sum(1 for ch in text if ch == "\ufffd" or (masked and ch == masked) or (
        ch not in _OK_CONTROL and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn")))
    return bad / len(text)


def repeated_unit(text: str, *, min_tokens: int = 8, share: float = 0.6) -> str | None:
    """The token (or short character period) a sample repeats, else ``None``."""
    body = text.rstrip("…").strip()
    tokens = body.split()
    if len(tokens) >= min_tokens:
        token, count = Counter(tokens).most_common(1)[0]
        if count / len(tokens) >= share:
            return token
    if len(body) >= 2 * min_tokens and " " not in body.strip():
        for period in range(1, 9):
            unit = body[:period]
            if (unit * (len(body) // period + 1)).startswith(body):
                return unit
    return None


def compression_ratio(texts: Iterable[str], min_bytes: int = 256) -> float | None:
    """zlib size / raw size of a step's outputs (too little text says nothing)."""
    data = "\n".join(texts).encode("utf-8", "replace")
    return len(zlib.compress(data, 9)) / len(data) if len(data) >= min_bytes else None


def _ngrams(text: str) -> set[str]:
    words = text.split()
    if len(words) >= 3:
        return {" ".join(words[i:i + 3]) for i in range(len(words) - 2)}
    return {text[i:i + 3] for i in range(max(1, len(text) - 2))}


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' 3-grams (words, else characters)."""
    x, y = _ngrams(a), _ngrams(b)
    return len(x & y) / len(x | y) if x | y else 1.0

