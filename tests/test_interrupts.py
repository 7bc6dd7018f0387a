"""nvmeter.interrupts.held: signals held back through a block, the first delivered after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from nvmeter import interrupts


@pytest.fixture
def seen():
    got: list[int] = []
    before = {s: signal.signal(s, lambda signum, _f: got.append(signum)) for s in interrupts.HELD}
    yield got
    for s, handler in before.items():
        signal.signal(s, handler)


def test_a_signal_in_the_block_reaches_its_handler_after_it(seen):
    with interrupts.held() as interrupted:
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [] and interrupted.signums == [signal.SIGTERM]
    assert seen == [signal.SIGTERM]


def test_every_signal_is_held_and_each_delivered_once_in_order(seen):
    with interrupts.held() as interrupted:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C cannot cut the cleanup either
        assert seen == [] and interrupted.signums == [signal.SIGTERM, signal.SIGINT]
    assert seen == [signal.SIGTERM, signal.SIGINT]


def test_a_held_signal_is_delivered_when_the_block_raises(seen):
    with pytest.raises(RuntimeError), interrupts.held():
        os.kill(os.getpid(), signal.SIGTERM)
        raise RuntimeError("the cleanup failed")
    assert seen == [signal.SIGTERM]


def test_the_console_s_ctrl_c_replaces_a_failure_of_the_block_and_keeps_it(ctrl_c_raises):
    with pytest.raises(KeyboardInterrupt) as raised, interrupts.held():
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("the cleanup failed")
    assert isinstance(raised.value.__context__, RuntimeError)


def test_no_signal_no_delivery_and_the_handlers_restored(seen):
    handlers = {s: signal.getsignal(s) for s in interrupts.HELD}
    with interrupts.held() as interrupted:
        pass
    assert not interrupted and seen == []
    assert {s: signal.getsignal(s) for s in interrupts.HELD} == handlers


def test_the_console_s_ctrl_c_is_raised_after_the_block(ctrl_c_raises):
    steps = []
    with pytest.raises(KeyboardInterrupt), interrupts.held():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("the block ran to its end")
    assert steps == ["the block ran to its end"]


def test_outside_the_main_thread_nothing_is_held(seen):
    before = signal.getsignal(signal.SIGTERM)
    result = {}

    def block():
        with interrupts.held() as interrupted:
            result["handler"] = signal.getsignal(signal.SIGTERM)
            result["interrupted"] = bool(interrupted)

    thread = threading.Thread(target=block)
    thread.start()
    thread.join()
    assert result["handler"] is before and not result["interrupted"]


def test_a_default_sigterm_still_ends_the_process_after_the_block():
    code = (
        "import os, signal; from nvmeter import interrupts\n"
        "with interrupts.held():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('block done', flush=True)\n"
        "print('after', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM and done.stdout == "block done\n"


def test_an_ignored_signal_stays_ignored(seen):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with interrupts.held() as interrupted:
        os.kill(os.getpid(), signal.SIGHUP)
    assert not interrupted and seen == [] and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_an_interruption_under_way_is_not_replaced_by_one_held_in_its_cleanup(seen):
    """SIGTERM, then a Ctrl-C in the cleanup: the command ends as terminated (143), not interrupted."""

    class Terminated(KeyboardInterrupt):
        pass

    with pytest.raises(Terminated):
        try:
            raise Terminated
        finally:
            with interrupts.held() as interrupted:
                os.kill(os.getpid(), signal.SIGINT)
            assert interrupted.signums == [signal.SIGINT]
    assert seen == []
