"""``nvmeter run``: meter a whole command, from before it starts to after it exits.

The command runs as a child process with this process's standard streams. Before it starts,
each board's idle is measured (a quiescent span with no CUDA context of nvmeter's own; or
a probe file's no-context idle, or a figure given in W), and a window opens on every board
(aligned edges: the start edge waits for a counter step). The window stays open for the
child's whole life, start-up and CUDA context included, reading the sample buffer about
once a second, and closes on the first counter step after the child has exited. The
figures are the window's: gross energy, energy above that idle with its bound, mean power.

Signals: the child starts in a session of its own, so everything it starts can be killed
with it, and a terminal's signals reach only nvmeter. SIGINT, SIGTERM, SIGHUP and SIGQUIT
that reach nvmeter are forwarded to the child's process group and remembered; the window
closes when the child exits, and the record says it was interrupted. A third such signal
kills the whole group. SIGWINCH, SIGUSR1, SIGUSR2 and SIGALRM are passed on, and SIGTSTP
(Ctrl-Z) stops the group, then nvmeter; continuing nvmeter continues it. Once the command and
its windows have ended, a signal is noted, not acted on, until the record is written
(:class:`LateSignals`): the figures, the record and the command's exit status are kept. The
console then ignores SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM until it exits
(:func:`nvmeter.cli.run._settle`).

On the simulated board (``--simulate``) the child cannot drive the board's virtual clock,
so :class:`SimulatedLife` does: while the child lives, the virtual clock follows the host's
real time and the board holds a CUDA context plus a fixed load (docs/everyday.md says what
this does and does not test).
"""

from nvmeter.command.life import Life, RealLife, SimulatedLife
from nvmeter.command.meter import run_command
from nvmeter.command.process import LateSignals, resolve_command
from nvmeter.command.record import BoardRun, CommandRun, load_run

__all__ = [
    "BoardRun",
    "CommandRun",
    "LateSignals",
    "Life",
    "RealLife",
    "SimulatedLife",
    "load_run",
    "resolve_command",
    "run_command",
]
