"""Who posts interval ``n``'s sweep, also while Redis is unreachable.

Policy: with Redis up, the replica whose ``SET NX PX tick:{n}`` succeeds posts, and every
other replica stays quiet (``bot.scheduler``). While Redis is unreachable nobody can win that
lock, and the issue's rule is *no duplicate posts* with answers still served. So each replica
remembers the last interval it saw decided and whether it won it, and falls back as follows:

* ``lead`` (it won the last decided interval, and every interval since was undecidable): it
  keeps posting, the sweep thread marked degraded; collapse DMs come from its process memory
  (``bot.alerts``), so it DMs an episode at most once. One replica won the last decided
  interval, so exactly one keeps posting through an outage.
* ``follow`` (another replica won the last decided interval): it posts nothing; it answers
  commands from live sweeps as always.
* ``alone`` (it never saw an interval decided: it started during the outage): no channel
  thread (it cannot know whether another replica is leading), but it still sweeps and DMs
  collapses, once per process: a collapse alert is never silenced by an outage. The one
  duplicate this allows is a collapse DM from each replica that *started* during the same
  outage; the channel never gets two threads for one interval.

When Redis answers again the lock decides as before, and the lease follows it. A leader that
dies during an outage leaves the channel quiet (DMs included, if every survivor is a follower)
until Redis returns: /healthz shows ``redis`` unavailable meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Fallback = Literal["lead", "follow", "alone"]


@dataclass
class TickLease:
    """One replica's memory of the tick lock, for deciding what to do when it is unreachable."""

    last_decided: int | None = None
    won_last: bool = False
    degraded: tuple[int, Fallback] | None = None
    """The latest interval claimed without the lock, and in which role."""

    def decided(self, interval: int, won: bool) -> None:
        """The lock answered for ``interval``: ``won`` is whether this replica took it."""
        self.last_decided, self.won_last, self.degraded = interval, won, None

    def unreachable(self, interval: int) -> Fallback:
        """The lock could not be asked for ``interval``: this replica's fallback role."""
        role: Fallback = "alone" if self.last_decided is None else (
            "lead" if self.won_last else "follow")
        self.degraded = (interval, role)
        return role

    def fallback(self, interval: int) -> Fallback | None:
        """How ``interval`` was claimed without the lock, or None if the lock decided it."""
        if self.degraded is not None and self.degraded[0] == interval:
            return self.degraded[1]
        return None
