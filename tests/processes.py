"""Process helpers shared by the tests that start and kill real child processes."""

import time

import psutil


def gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` has exited (or is a zombie awaiting its parent) within ``within_s``."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False
