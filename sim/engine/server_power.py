"""The power of a pool's servers in a run (docs/servers.md, "Host power in a run"): each
server's host draws `sim.models.servers.host_power_w` at its host utilisation, the share
of its GPUs that jobs hold, and with the site's `power_off` a server whose GPUs have all
been free for `idle_s` switches off whole (host and GPUs: `off_w`) and boots again
(`wake_s`) when a job is placed on it. Engine-free: `sim.engine.servers.ServerBooks` drives
it with times and the servers an assignment touches.

The pool's standing power (every GPU at idle power, plus each powered server's host, plus
`off_w` per server off) is piecewise constant between those calls: the ledger integrates
it exactly, and a job's GPUs add their draw above idle (`sim.engine.ledger.Site`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.config.sites import PowerOff
from sim.models.servers import ServerModel, host_power_w

__all__ = ["ServerPower"]


class ServerPower:
    """Per server of one pool: GPUs held, powered or not, when it boots, since when it is
    idle, and its host's energy so far. O(servers touched) per change."""

    __slots__ = (
        "host_w_by_held",
        "power_off",
        "standing_w",
        "servers_on",
        "boots",
        "_gpu_idle_w",
        "_held",
        "_on",
        "_boot_end_s",
        "_idle_since",
        "_since_s",
        "_host_ws",
        "_off_s",
    )

    def __init__(
        self, model: ServerModel, servers: int, gpu_idle_w: float, power_off: PowerOff | None
    ):
        gpus = model.gpus
        self.host_w_by_held = tuple(host_power_w(model, k / gpus) for k in range(gpus + 1))
        """The host's power with k of its GPUs held (host utilisation k / GPUs), W."""
        self.power_off = power_off
        self._gpu_idle_w = gpus * gpu_idle_w
        self._held = [0] * servers
        self._on = [True] * servers
        self._boot_end_s = [0.0] * servers
        self._idle_since: dict[int, float] = dict.fromkeys(range(servers if power_off else 0), 0.0)
        """With `power_off`: the powered servers with no GPU held and since when (s), the
        longest idle first."""
        self._since_s = [0.0] * servers
        self._host_ws = [0.0] * servers
        self._off_s = [0.0] * servers
        self.standing_w = servers * self._server_w(0)
        """The pool's power with every GPU at idle: powered servers' hosts and GPUs, and
        `off_w` per server off, W."""
        self.servers_on = servers
        """Powered servers (booting ones included)."""
        self.boots = 0
        """Servers switched on again so far."""

    def _server_w(self, s: int) -> float:
        """Server `s`'s power with its GPUs at idle, W."""
        if not self._on[s]:
            assert self.power_off is not None
            return self.power_off.off_w
        return self.host_w_by_held[self._held[s]] + self._gpu_idle_w

    def _settle(self, s: int, now_s: float) -> None:
        """Book server `s`'s host energy (or time off) up to `now_s`, s."""
        dt = now_s - self._since_s[s]
        if self._on[s]:
            self._host_ws[s] += self.host_w_by_held[self._held[s]] * dt
        else:
            self._off_s[s] += dt
        self._since_s[s] = now_s

    def _set(self, s: int, now_s: float, held: int, on: bool) -> None:
        self._settle(s, now_s)
        before = self._server_w(s)
        self._held[s], self._on[s] = held, on
        self.standing_w += self._server_w(s) - before

    def powered(self, free: Sequence[int]) -> list[int]:
        """`free` GPUs by server, with 0 for the servers off (placement tries these first)."""
        return [f if on else 0 for f, on in zip(free, self._on, strict=True)]

    def wake_s(self, now_s: float, servers: Sequence[int]) -> float:
        """Time before every server of `servers` can compute, s: `power_off.wake_s` if one
        is off, else the rest of the longest boot under way (0: all up)."""
        if self.power_off is None:
            return 0.0
        if any(not self._on[s] for s in servers):
            return self.power_off.wake_s
        return max(0.0, *(self._boot_end_s[s] - now_s for s in servers))

    def to_wake(self, servers: Sequence[int]) -> int:
        """The servers of `servers` that are off."""
        return sum(not self._on[s] for s in servers)

    def take(self, now_s: float, taken: Sequence[tuple[int, int]]) -> int:
        """A job takes (server, GPUs) of `taken` at `now_s`, s: servers off boot (for
        `power_off.wake_s`). Returns how many."""
        woken = 0
        for s, gpus in taken:
            if not self._on[s]:
                assert self.power_off is not None
                woken += 1
                self._boot_end_s[s] = now_s + self.power_off.wake_s
            self._idle_since.pop(s, None)
            self._set(s, now_s, self._held[s] + gpus, True)
        self.servers_on += woken
        self.boots += woken
        return woken

    def give_back(self, now_s: float, given: Sequence[tuple[int, int]]) -> int:
        """A job gives back (server, GPUs) of `given` at `now_s`, s. Returns the servers it
        left with no GPU held (idle since now; 0 without `power_off`)."""
        idle = 0
        for s, gpus in given:
            self._set(s, now_s, self._held[s] - gpus, True)
            if self._held[s] == 0 and self.power_off is not None:
                self._idle_since[s] = now_s
                idle += 1
        return idle

    def switch_off_idle(self, now_s: float) -> int:
        """Switch off every server idle for at least `power_off.idle_s` at `now_s`, s;
        returns how many (none without `power_off`)."""
        if self.power_off is None:
            return 0
        due = []
        for s, t in self._idle_since.items():  # by idle time, oldest first
            if t + self.power_off.idle_s > now_s:
                break
            due.append(s)
        for s in due:
            del self._idle_since[s]
            self._set(s, now_s, 0, False)
        self.servers_on -= len(due)
        return len(due)

    def host_kwh(self, now_s: float) -> list[float]:
        """Each server's host IT energy (while powered) up to `now_s`, kWh."""
        for s in range(len(self._held)):
            self._settle(s, now_s)
        return [ws / 3.6e6 for ws in self._host_ws]

    def off_h(self, now_s: float) -> list[float]:
        """Each server's time off up to `now_s`, h."""
        for s in range(len(self._held)):
            self._settle(s, now_s)
        return [t / 3600.0 for t in self._off_s]
