"""What ``/proc`` says about a process: alive or not (zombies count as dead), its group and session, when it
started (to tell a recycled pid from the process we launched), and which signals it catches or ignores.

Why it matters: a restarted scheduler re-adopts pods that are not its children, so ``wait`` is not available and
a bare pid could by now belong to someone else. Linux only; elsewhere the functions degrade to ``kill(pid, 0)``.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class ProcStat:
    pid: int
    state: str
    pgrp: int
    session: int
    start_ticks: int

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X", "x")


def has_procfs() -> bool:
    return (PROC / "self" / "stat").exists()


def stat(pid: int) -> ProcStat | None:
    """The process's stat line, or ``None`` if there is no such process."""
    if not has_procfs():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ProcStat(pid, "R", os.getpgid(pid), os.getsid(pid), 0)
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name sits in parentheses and may contain spaces and parentheses itself.
    fields = raw[raw.rindex(")") + 2:].split()
    return ProcStat(pid=pid, state=fields[0], pgrp=int(fields[2]), session=int(fields[3]),
                    start_ticks=int(fields[19]))


def is_same_process(pid: int, start_ticks: int) -> bool:
    """True if ``pid`` is alive and is the process that started at ``start_ticks`` (not a recycled pid)."""
    info = stat(pid)
    return info is not None and info.alive and (start_ticks == 0 or info.start_ticks == start_ticks)


def group_members(pgid: int, *, since_ticks: int = 0) -> list[int]:
    """Live processes of process group ``pgid`` that started no earlier than ``since_ticks``."""
    if not has_procfs():
        return []
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        info = stat(int(entry.name))
        if info is not None and info.alive and info.pgrp == pgid and info.start_ticks >= since_ticks:
            members.append(info.pid)
    return members


def handles(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` or ignores it (either way the default action will not kill it)."""
    if not has_procfs():
        return True
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    masks = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("SigCgt", "SigIgn"):
            masks[key] = int(value.strip(), 16)
    bit = 1 << (signum - 1)
    return bool((masks.get("SigCgt", 0) | masks.get("SigIgn", 0)) & bit)


def cmdline(pid: int) -> list[str] | None:
    """The process's argument vector (``None`` if unreadable)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was started with (``None`` if unreadable)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            key, _, value = item.partition(b"=")
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def signal_group(pgid: int, signum: int, *, leader_start_ticks: int) -> bool:
    """Signal a pod's process group, making sure it is still ours: through the leader when it is the process we
    started, else member by member (the leader died, its children may live on). Returns whether any was signalled."""
    if is_same_process(pgid, leader_start_ticks):
        try:
            os.killpg(pgid, signum)
            return True
        except ProcessLookupError:
            return False
    sent = False
    for pid in group_members(pgid, since_ticks=leader_start_ticks):
        try:
            os.kill(pid, signum)
            sent = True
        except ProcessLookupError:
            pass
    return sent


SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGKILL: "SIGKILL", signal.SIGUSR1: "SIGUSR1"}
