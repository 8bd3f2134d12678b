"""What a client knows of its aggregator's configuration, and the first-use look-up that learns it.

Per group the member count N, per job the slot window W and where its chunk numbers start
(``JOBj_HEAD``, docs/host.md "Chunk numbers"), once per client the element limit — given to the
client, or read over CONTROL in one message on first use. Every refusal says what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from wanreduce import regs, wire

from .control import ControlClient, ControlTimeout
from .errors import AggregatorUnreachable, ConfigMismatch


class JobConfig:
    """Group sizes, job windows and first chunks of one client (``next_chunk`` is the client's
    chunk counter per job, filled here with the head read on a job's first use)."""

    def __init__(
        self,
        control: ControlClient | None,
        *,
        where: str,
        port: int,
        timeout: float,
        sender_id: int,
        elements: int,
        group_sizes: Mapping[int, int] | None,
        job_windows: Mapping[int, int] | None,
        next_chunk: dict[int, int],
        first_chunk: int | None,
    ) -> None:
        self.control, self.where, self.port, self.timeout = control, where, port, timeout
        self.sender_id, self.elements = sender_id, elements
        self.group_sizes = dict(group_sizes or {})
        self.job_windows = dict(job_windows or {})
        self.next_chunk = next_chunk
        self.first_chunk = first_chunk
        self.limit_checked = False  # MAX_ELEMENTS compared with elements_per_packet

    def _lookup(self, what: str, addrs: list[int]) -> list[int]:
        """Read registers over CONTROL (resent on the timer until answered or ``timeout``)."""
        assert self.control is not None
        try:
            return self.control.read_many(addrs)
        except ControlTimeout as exc:
            raise AggregatorUnreachable(
                f"aggregator {self.where} unreachable: no reply to a CONTROL read ({what}) "
                f"within {self.timeout:g} s: is it running and listening there (`wanreduce serve "
                f"--port {self.port}`)? A client may start first: pass a timeout= that "
                f"covers the aggregator's start-up"
            ) from exc

    def configure(self, *, group: int | None = None, job: int | None = None, head: bool = False) -> None:
        """Learn, in one CONTROL message, what this client does not know yet: the group's
        members, the job's window, where the job's chunk numbers start (``head``) and, once per
        client, the aggregator's element limit. Without CONTROL access, an error naming the
        argument that supplies the missing value."""
        want: dict[str, int] = {}
        if group is not None and group not in self.group_sizes:
            want["group"] = regs.group(group)
        if job is not None and job not in self.job_windows:
            want["cfg"] = regs.job_cfg(job)
        if head and job is not None and job not in self.next_chunk and self.first_chunk is None:
            want["head"], want["ctrl"] = regs.job_head(job), regs.CTRL
        if self.control is None:
            if "group" in want:
                raise ConfigMismatch(
                    f"group {group} size unknown: no CONTROL access to the aggregator; pass "
                    f"group_sizes={{{group}: N}} (N members) to AggregatorClient"
                )
            if "cfg" in want:
                raise ConfigMismatch(
                    f"job {job} window unknown: no CONTROL access to the aggregator; pass "
                    f"job_windows={{{job}: W}} (the job's slots) to AggregatorClient"
                )
            if "head" in want:
                raise ConfigMismatch(
                    f"job {job}: where its chunk numbers start is unknown without CONTROL access "
                    f"(JOB{job}_HEAD): pass first_chunk= to AggregatorClient or call "
                    f"set_next_chunk({job}, chunk), the same on every member (0 after the job's "
                    f"window was reset, e.g. ControlClient(addr).reset_window({job}))"
                )
            return
        if not self.limit_checked:
            want["max"] = regs.MAX_ELEMENTS
        if not want:
            return
        what = ", ".join(
            {"group": f"group {group} members", "cfg": f"job {job} configuration",
             "head": f"job {job} head", "ctrl": "release mode", "max": "element limit"}[k]
            for k in want if k != "ctrl"
        )
        got = dict(zip(want, self._lookup(what, list(want.values())), strict=True))
        if "max" in got:
            limit = got["max"]
            if self.elements > limit:
                raise ConfigMismatch(
                    f"elements_per_packet={self.elements} exceeds the aggregator's limit of "
                    f"{limit} elements per packet (its MAX_ELEMENTS register): pass "
                    f"elements_per_packet={limit} (or less, the same on every member) to "
                    f"AggregatorClient, or raise the limit (`wanreduce serve --elements "
                    f"{self.elements}`, or write MAX_ELEMENTS up to the core's E)"
                )
            self.limit_checked = True
        if "group" in got:
            members = [i for i in range(wire.MAX_SENDERS) if got["group"] >> i & 1]
            if not members:
                raise ConfigMismatch(
                    f"group {group} has no members configured on the aggregator: configure it, "
                    f"e.g. `wanreduce serve --group {group}:0,1,2` (the members' sender ids) or "
                    f"ControlClient(addr).set_group({group}, [0, 1, 2])"
                )
            if self.sender_id not in members:
                raise ConfigMismatch(
                    f"sender {self.sender_id} is not a member of group {group} {members}: use "
                    f"one of those sender_id values, or add {self.sender_id} to the group "
                    f"(`wanreduce serve --group {group}:"
                    f"{','.join(map(str, sorted({*members, self.sender_id})))}` or "
                    f"ControlClient(addr).set_group)"
                )
            self.group_sizes[group] = len(members)
        if "cfg" in got:
            enabled, log2w, _ = regs.unpack_job_cfg(got["cfg"])
            if not enabled:
                raise ConfigMismatch(
                    f"job {job} is not enabled on the aggregator: enable it, e.g. `wanreduce "
                    f"serve --job {job}` or ControlClient(addr).set_job({job}, log2_window=L)"
                )
            self.job_windows[job] = 1 << log2w
        if "head" in got:
            if got["ctrl"] & regs.CTRL_RELEASE_ON_COMPLETION:
                raise ConfigMismatch(
                    f"job {job}: the aggregator releases results on completion, where "
                    f"JOB{job}_HEAD does not follow the chunks, so a new client cannot tell where "
                    f"an earlier run of job {job} ended: reset the job's window before the run "
                    f"(ControlClient(addr).reset_window({job})) and pass first_chunk=0 to every "
                    f"member's AggregatorClient (or call set_next_chunk({job}, 0))"
                )
            self.next_chunk[job] = got["head"]
