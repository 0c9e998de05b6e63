"""Whether a process still runs, for the files that name one (a broker's pid file, a job's spool)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists (also when it is another user's); a zombie child of ours is reaped, not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:  # not our child: it exists
        return True


__all__ = ["pid_alive"]
