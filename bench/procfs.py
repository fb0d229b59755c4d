"""What Linux /proc tells of processes: CPU seconds of one or of a tree, settling, connections held."""

from __future__ import annotations

import os
import time
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, limit: float = 300.0) -> float:
    """Wait until a process stays nearly idle for two seconds; the seconds it took."""
    start = time.perf_counter()
    used = cpu_seconds(pid)
    while time.perf_counter() - start < limit:
        time.sleep(2)
        now = cpu_seconds(pid)
        if now - used < 0.1:
            break
        used = now
    return time.perf_counter() - start


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds spent so far by `roots` and every process below them (Linux /proc).

    On a shared machine, wall time swings with other load; the CPU a read costs
    (the JVM, its Python workers, the sharing server) hardly does.
    """
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # utime, stime, and cutime, cstime: workers that have exited count too.
        times[pid] = sum(int(value) for value in fields[11:15]) / tick
    wanted = set(roots)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in wanted} - wanted
        grew = bool(below)
        wanted |= below
    return sum(times.get(pid, 0.0) for pid in wanted)


def connections_held(port: int) -> int:
    """Established TCP connections whose local end is `port`: the server's ends (Linux)."""
    ours = f":{port:04X}"
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _, state = line.split()[1:4]
            count += local.endswith(ours) and state == "01"
    return count
