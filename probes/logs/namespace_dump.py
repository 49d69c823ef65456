"""A ``types.SimpleNamespace`` repr read as a config (``probes.logs.fingerprint``).

OpenRLHF >= 0.10 (its dotted config hierarchy) nests its argparse args into namespaces
(``openrlhf/utils/config.py``'s ``hierarchize``) and prints them on one line:
``namespace(actor=namespace(model_name_or_path='Qwen/...', num_nodes=2), rollout=namespace(
batch_size=64, n_samples_per_prompt=8), ...)``. argparse's own flat ``Namespace(...)`` is read
by the fingerprint's one-line reader; this nested, lower-case form is not.

Policy: parsed with ``ast`` and never evaluated: each keyword whose value is a literal (a number,
string, bool, None, or a list/tuple/dict of them) is one dotted entry, a nested
``namespace(...)`` its keys' prefix, any other value (a ``PosixPath('...')``) left out. The repr
must run to the line's end (a cut or trailing text is no repr); bounded to ``MAX_CHARS``.
"""

from __future__ import annotations

import ast

MAX_CHARS = 20000
_OPEN = "namespace("


def namespace_entries(body: str) -> dict[str, object] | None:
    """The dotted entries of the ``namespace(...)`` repr that ends ``body``, else None."""
    at = body.find(_OPEN)
    while at > 0 and (body[at - 1].isalnum() or body[at - 1] == "_"):
        at = body.find(_OPEN, at + 1)  # ``SimpleNamespace(`` or ``Namespace(``: another form
    if at < 0:
        return None
    text = body[at:].rstrip()
    if len(text) > MAX_CHARS:
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not _is_namespace(node):
        return None
    entries: dict[str, object] = {}
    _walk(node, "", entries)
    return entries or None


def _is_namespace(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "namespace" and not node.args)


def _walk(call: ast.AST, prefix: str, entries: dict[str, object]) -> None:
    for keyword in getattr(call, "keywords", ()):
        if keyword.arg is None:
            continue
        key = prefix + keyword.arg
        if _is_namespace(keyword.value):
            _walk(keyword.value, key + ".", entries)
            continue
        try:
            entries[key] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue  # not a literal: no entry
