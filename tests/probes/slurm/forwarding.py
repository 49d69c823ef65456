"""A real runner passed through: a base for the runners tests and benchmarks put around one to
note what it sends or answers (the probe's argv, the collector's streamed answer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from probes.slurm.runner import CommandResult, Runner, run_streaming


class ForwardingRunner:
    """Every call handed to ``inner``; subclasses override :meth:`run` / :meth:`run_streaming`
    and call these."""

    def __init__(self, inner: Runner) -> None:
        self._inner = inner

    @property
    def target(self) -> str:
        return self._inner.target

    @property
    def commands_sent(self) -> int:
        return self._inner.commands_sent

    @property
    def login_user(self) -> str:
        return self._inner.login_user

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        return await self._inner.run(argv, stdin=stdin, check=check)

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        return await run_streaming(self._inner, argv, stdin=stdin, on_chunk=on_chunk)

    async def aclose(self) -> None:
        await self._inner.aclose()
