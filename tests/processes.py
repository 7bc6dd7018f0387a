"""Process helpers shared by the tests that start and kill real child processes."""

import time

import psutil


def gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` has exited (or is a zombie awaiting its parent) within ``within_s``.

    It looks at least once, so ``within_s=0`` asks whether it has exited now.
    """
    end = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
