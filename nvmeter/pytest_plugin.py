"""nvmeter's pytest plugin: hold an energy budget in a test suite, as pytest-benchmark holds a time one.

Registered through the ``pytest11`` entry point (pyproject.toml), so installing nvmeter
makes it available; it does nothing until a test asks for it:

* the ``energy`` fixture meters a block::

      def test_step(energy):
          with energy(device=0) as w:      # EnergyWindow's keywords: idle=, sync=, calls=, ...
              for _ in range(100):
                  step()
                  w.call()
          assert w.result.reliable

* the ``energy`` marker holds a budget::

      @pytest.mark.energy(max_mj_per_call=1500, calls=100)
      def test_step_budget():
          for _ in range(100):
              step()

  Without the fixture, the marker meters the whole test call as ``calls`` calls (default 1).
  With the fixture, it judges every window the test opened through it instead (their calls
  are their own: a marker that gives ``calls=`` there fails the test, saying so).

A window passes when its figure plus its bound is within the budget and fails when its
figure minus its bound exceeds it. In between, or when the figure is not reliable, the test
fails with the reason (``--energy-undecided=warn`` makes that a warning). Without a GPU a
metered test is skipped with the reason. Results go to the terminal summary and, with
``--energy-json FILE``, to a JSON record (kind ``pytest-energy``, :mod:`nvmeter.budgets`;
``nvmeter show FILE`` reads it). ``--energy-simulate`` meters the simulated board (tests
drive it through the ``energy_board`` fixture).

The module imports only pytest and nvmeter's light modules at load time, so it costs
nothing in test runs that do not use it.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import pytest

from nvmeter import errors, records
from nvmeter.budgets import KIND as ENERGY_KIND
from nvmeter.budgets import Budget, BudgetRecord, Entry, judge

# What --energy-undecided takes.
_MODES = ("fail", "warn")


class EnergyBudgetWarning(UserWarning):
    """An energy budget that could not be decided, under ``--energy-undecided=warn``."""


# -- the session's state -------------------------------------------------------------------
class _State:
    """Boards opened once per session, the idle setting, and every window's entry."""

    def __init__(self, config) -> None:
        self.simulate = bool(config.getoption("energy_simulate"))
        self.others_idle = bool(config.getoption("energy_others_idle"))
        self.mode = config.getoption("energy_undecided") or config.getini("energy_undecided") or "fail"
        if self.mode not in _MODES:
            raise pytest.UsageError(f"--energy-undecided must be fail or warn, not {self.mode!r}")
        from nvmeter.meter.baseline import idle_spec  # the meter loads only when a test meters

        try:
            self.idle = idle_spec(config.getoption("energy_idle"))
            # a file that is no probe is said before any test runs: one parse more a session (~18 ms
            # on results/probe-h200.json), the board's own check waits for the board (idle_for)
            if isinstance(self.idle, Path):
                records.read_json(self.idle, "probe")
        except (errors.UsageError, errors.RecordError) as exc:
            raise pytest.UsageError(f"--energy-idle: {exc}".replace("--idle takes", "it takes")) from None
        self.json_path = config.getoption("energy_json")
        if self.json_path is not None and _xdist(config):
            # each worker kept its windows and the controller wrote an empty record over them, exit 0
            # (an adversarial review, 2026-12-06)
            raise pytest.UsageError(
                "--energy-json: pytest-xdist's workers keep their own windows and this record would "
                "hold none: run without -n or --tx (or with -n 0) to write it"
            )
        self.json_claim: records.Claim | None = None
        if self.json_path is not None:
            try:
                idle_file = self.idle if isinstance(self.idle, Path) else None
                inputs = (("--energy-idle", idle_file),)
                self.json_claim = records.claim(str(self.json_path), inputs=inputs, kind=ENERGY_KIND)
            except errors.UsageError as exc:
                raise pytest.UsageError(f"--energy-json: {exc}") from None
        self.json_written: Path | None = None  # where --energy-json went, once written
        self.json_failure: Exception | None = None  # why it could not be written, at the session's end
        self._boards: dict = {}
        # (board UUID, idle level): the probe file's IdleBaseline; board UUID: watts judged for it
        self._idles: dict = {}
        self.entries: list[Entry] = []

    def board(self, device):
        """The board for ``device``, opened once; skips the test when there is no GPU.

        A device this machine lacks while NVML answers (an index past its boards, a UUID
        of none) fails the test at setup instead: skipping it as "no GPU" hid a typo in the
        marker on a machine with GPUs (an adversarial review, 2026-12-06).
        """
        __tracebackhide__ = True  # a skip or a failure is reported at the test's line
        found = self._open(device)
        if isinstance(found, errors.DeviceNotFound):
            named = "0 (the default)" if device is None else repr(device)
            pytest.fail(f"the energy window's device {named}: {found}", pytrace=False)
        why = self.unavailable(device)
        if why is not None:
            pytest.skip(why)
        return found

    def unavailable(self, device) -> str | None:
        """Why the tests metering ``device`` are skipped (no driver, no GPU, NVML failed), or None."""
        found = self._open(device)
        if not isinstance(found, Exception) or isinstance(found, errors.DeviceNotFound):
            return None
        # the board's own message names nvmeter's --simulate; pytest's option is another
        return "no GPU to meter: " + str(found).replace("--simulate", "--energy-simulate")

    def _open(self, device):
        """The board for ``device``, or the telemetry error opening it raised; opened once."""
        from nvmeter.boards.factory import open_board

        key = device if device is not None else 0
        if key not in self._boards:
            try:
                self._boards[key] = open_board(device, simulate=self.simulate, config=self._sim_config())
            except errors.TelemetryError as exc:
                self._boards[key] = exc
        return self._boards[key]

    def idle_for(self, board):
        """The idle a window on ``board`` subtracts: ``--energy-idle``'s, a probe file read for this board.

        A probe file gives the idle at the board's level (:func:`~nvmeter.meter.baseline.context_level`),
        read here rather than by the window so that a probe of another board ends the session
        in one line (exit 4), as a bad option would have, not each test in a traceback.
        """
        from nvmeter.boards.profile import resolve_profile
        from nvmeter.meter.baseline import context_level, given_idle

        if isinstance(self.idle, float):  # watts: judged once a board, here, for the same reason
            if board.identity().uuid not in self._idles:
                try:
                    self._idles[board.identity().uuid] = given_idle(self.idle, board)
                # over its limit, under 90% of its rest: a traceback a test, before; a little under its
                # rest warns (once: the widened idle is what every window takes), an error under -W error
                except (errors.UsageError, errors.NvmeterWarning) as exc:
                    pytest.exit(f"--energy-idle: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
            return self._idles[board.identity().uuid]
        if not isinstance(self.idle, Path):
            return self.idle

        key = (board.identity().uuid, context_level(board))
        if key not in self._idles:  # the file is read and verified once a board and level, not a window
            try:
                artefact_w = resolve_profile(None, board.identity(), self.idle).polling_artefact_w
                self._idles[key] = given_idle(self.idle, board, key[1], artefact_w)
            except errors.RecordError as exc:
                pytest.exit(f"--energy-idle: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        return self._idles[key]

    def _sim_config(self):
        """The simulated board's config: the UUID `nvmeter probe --simulate` records.

        So --energy-idle takes that probe file however many boards the tests made themselves
        before (each of those takes the next simulated UUID).
        """
        if not self.simulate:
            return None
        from nvmeter.boards.simulated import FIRST_UUID, SimConfig

        return SimConfig(uuid=FIRST_UUID)

    def quiet_simulated(self) -> None:
        """Switch off the load and the other processes a test left on a simulated board.

        The simulated board is one for the session and its load is a setting: left on, it
        would be the next test's idle; another process a test put on it failed the next test
        too (a new user's trial, 2026-12-07).
        """
        if not self.simulate:
            return
        for board in self._boards.values():
            if not isinstance(board, Exception):
                board.set_load(0.0)
                board.other_pids.clear()
                if board.context_open:  # held by this process again, not by a pid a test named
                    board.set_context(True)

    def record(self, item, m, budget: Budget | None) -> None:
        """Keep a finished window's entry."""
        self.entries.append(Entry(item.nodeid, m, budget, judge(m, budget)))

    def settle(self, item) -> None:
        """Fail (or warn) for this test's windows that did not pass: failures first."""
        mine = [e for e in self.entries if e.nodeid == item.nodeid]
        failed = _said(mine, ("fail",))
        if failed:
            pytest.fail(failed, pytrace=False)
        open_ = _said(mine, ("undecided", "unreliable"))
        if not open_:
            return
        if self.mode == "warn":
            # pointing at the test, not at this line (pytest's warnings summary says where)
            lineno = item.location[1]
            where = (str(item.path), 0 if lineno is None else lineno + 1)
            try:
                warnings.warn_explicit(EnergyBudgetWarning(open_), EnergyBudgetWarning, *where)
            except EnergyBudgetWarning:  # -W error made it one: a failure, said in one line
                pytest.fail(f"EnergyBudgetWarning: {open_} (raised as an error by -W error)", pytrace=False)
        else:
            pytest.fail(open_ + " (--energy-undecided=warn makes this a warning)", pytrace=False)

    def write_json(self, session_status: int) -> None:
        """Write the ``--energy-json`` record with pytest's exit status (``json_written`` says where)."""
        if self.json_path is None:
            return
        from nvmeter.provenance import collect

        record = BudgetRecord(tuple(self.entries), int(session_status), collect())
        try:
            records.write_claimed(self.json_claim, record.to_dict())
        except (errors.UsageError, OSError) as exc:
            # a full disk or a folder removed by a test: 64-68 lines of traceback lost the verdicts
            self.json_failure = exc
            return
        self.json_written = Path(self.json_path)


def _xdist(config) -> bool:
    """True when pytest-xdist spreads the tests over workers (or this is one of them).

    By ``-n N``, or by ``--tx`` gateways with a ``--dist`` mode (``-d --tx popen``): the workers
    each refused the option at start-up, and xdist replaced them for ever (an adversarial review).
    """
    option = config.option
    workers = getattr(option, "numprocesses", None)
    gateways = bool(getattr(option, "tx", None)) and getattr(option, "dist", "no") not in ("no", None)
    return hasattr(config, "workerinput") or (bool(workers) and workers != "0") or gateways


def _said(entries: list[Entry], outcomes: tuple[str, ...]) -> str:
    """The verdicts of the windows with these outcomes, numbered among the test's windows."""
    if len(entries) == 1:
        return entries[0].verdict.text if entries[0].verdict.outcome in outcomes else ""
    return "; ".join(
        f"window {i}: {e.verdict.text}" for i, e in enumerate(entries, 1) if e.verdict.outcome in outcomes
    )


def _said_budget(mark) -> str:
    """A marker's budget as a line says it, read as the marker is (positional or by name)."""
    try:
        return f"{Budget.from_mark(mark).max_mj_per_call:g} mJ/call"
    except errors.UsageError:
        return "a malformed one"


def _budget(item) -> Budget | None:
    """The test's budget (None: no marker); a malformed marker fails the test in one line."""
    mark = item.get_closest_marker("energy")
    if mark is None:
        return None
    # markers on the test itself: one budget (a class's or module's marker is overridden by design)
    own = [m for m in getattr(item, "own_markers", ()) if m.name == "energy"]
    if len(own) > 1:
        budgets = ", ".join(_said_budget(m) for m in own)
        pytest.fail(f"{len(own)} energy markers on this test (budgets {budgets}): keep one", pytrace=False)
    try:
        return Budget.from_mark(mark)
    except errors.UsageError as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)


_STATE = pytest.StashKey[_State]()


def _state(config) -> _State:
    return config.stash[_STATE]


# -- hooks ---------------------------------------------------------------------------------
def pytest_addoption(parser) -> None:
    """The plugin's options."""
    group = parser.getgroup("nvmeter", "energy budgets (nvmeter)")
    group.addoption(
        "--energy-undecided",
        choices=_MODES,
        default=None,
        help="What a budget that cannot be decided (the bound straddles it) or a figure that is "
        "not reliable does: fail the test (default) or warn.",
    )
    group.addoption("--energy-json", metavar="FILE", default=None, help="Write every metered window to FILE.")
    group.addoption(
        "--energy-idle",
        metavar="FILE|W",
        default=None,
        help="The idle subtracted, the board's idle with a CUDA context (a test's process holds one): "
        "a probe file of the board (its context idle), watts (121.3 on an H200), or measure (the "
        "default: measured around each window). Write it --energy-idle=FILE: pytest takes a path "
        "after a space into its rootdir.",
    )
    group.addoption(
        "--energy-simulate", action="store_true", help="Meter the simulated board (no GPU needed)."
    )
    group.addoption(
        "--energy-others-idle",
        action="store_true",
        help="Other processes holding a CUDA context on the board did no work: without it, a window "
        "that finds one is not reliable (their kernels would be counted as the test's).",
    )
    parser.addini("energy_undecided", "Default for --energy-undecided (fail or warn).", default=None)


def pytest_configure(config) -> None:
    """Register the marker; set up the session's state."""
    config.addinivalue_line(
        "markers",
        "energy(max_mj_per_call, calls=1, device=None): hold an energy budget, mJ per call above idle "
        "(nvmeter).",
    )
    config.stash[_STATE] = _State(config)


def pytest_collection_modifyitems(session, config, items) -> None:
    """Mark the energy-marked tests whose board cannot be opened to skip, so pytest says so at their line."""
    del session
    state = _state(config)
    for item in items:
        mark = item.get_closest_marker("energy")
        try:
            budget = Budget.from_mark(mark) if mark is not None else None
        except errors.UsageError:
            continue  # the test's setup says what is wrong with its marker, in one line
        why = state.unavailable(budget.device) if budget is not None else None
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(trylast=True)
def pytest_runtest_setup(item) -> None:
    """Check the marker and open its board (a skip without a GPU), after the fixtures."""
    budget = _budget(item)
    if budget is not None:
        if "energy" in item.fixturenames and "calls" in item.get_closest_marker("energy").kwargs:
            # the marker's calls= counts the whole test call, which a fixture window replaces
            pytest.fail(
                "the energy marker's calls= counts the whole test call, but this test opens energy() "
                "windows: declare their calls there (energy(calls=N), or w.call()), not in the marker",
                pytrace=False,
            )
        _state(item.config).board(budget.device)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Meter a marked test's call (unless it uses the fixture), then judge its windows."""
    budget = _budget(item)
    if budget is None:
        return (yield)
    state = _state(item.config)
    if "energy" in item.fixturenames:
        result = yield
        if not any(e.nodeid == item.nodeid for e in state.entries):
            pytest.fail(
                "marked with an energy budget, but no window was metered through the energy fixture",
                pytrace=False,
            )
    else:
        from nvmeter.meter.window import EnergyWindow

        board = state.board(budget.device)
        with EnergyWindow(
            board, idle=state.idle_for(board), calls=budget.calls, others_idle=state.others_idle
        ) as w:
            result = yield
        state.record(item, w.result, budget)
    state.settle(item)
    return result


def pytest_runtest_teardown(item, nextitem) -> None:
    """After each test, a simulated board's load goes off (its fixtures may set it for the next)."""
    del nextitem
    _state(item.config).quiet_simulated()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line per metered window, and where ``--energy-json`` went.

    The summary comes after :func:`pytest_sessionfinish` (the terminal reporter prints it
    once the session's other finishers have run), so the record is written by then.
    """
    del exitstatus
    state = _state(config)
    if state.entries:
        terminalreporter.section("nvmeter energy")
        for entry in state.entries:
            terminalreporter.write_line(entry.line())
    if state.json_written is not None:
        where = state.json_written
        terminalreporter.write_line(f"nvmeter: wrote {where} (`nvmeter show {where}` reads it)")
    failure = state.json_failure
    if failure is not None:
        # another process wrote at the path meanwhile, or a test removed its folder: the message says where
        kept = isinstance(failure, errors.RecordKept)
        said = "--energy-json kept elsewhere" if kept else "--energy-json not written"
        terminalreporter.write_line(f"nvmeter: {said}: {failure}", red=True)


def pytest_sessionfinish(session, exitstatus) -> None:
    """Write ``--energy-json``, saying how the session ended (an interrupted one holds fewer windows).

    A record that cannot be written is said in the summary, and a session that passed exits
    with pytest's usage-error status (4): its verdicts stand, its record is missing.
    """
    state = _state(session.config)
    state.write_json(exitstatus)
    if state.json_failure is not None and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


# -- fixtures ------------------------------------------------------------------------------
class EnergyMeter:
    """What the ``energy`` fixture gives: ``with energy(device=0, **window_kwargs) as w: ...``."""

    def __init__(self, request) -> None:
        self._item = request.node
        self._state = _state(request.config)
        self._budget = _budget(self._item)

    def __call__(self, device: int | str | None = None, **window_kwargs):
        """Meter the block on ``device``; yields the EnergyWindow (``w.call()``, ``w.result``).

        Keywords go to :class:`~nvmeter.meter.window.EnergyWindow` (``idle`` defaults to
        ``--energy-idle``). The window is judged against the marker's budget, if any, when
        the test's call ends. Skips the test when there is no GPU.
        """
        # the board is opened here, called from the test's own line, and this frame is hidden:
        # pytest then reports a skip at the test's line, not at the plugin's
        __tracebackhide__ = True
        _check_keywords(window_kwargs)
        return self._window(self.board(device), window_kwargs)

    @contextlib.contextmanager
    def _window(self, board, window_kwargs: dict):
        from nvmeter.meter.window import EnergyWindow

        window_kwargs.setdefault("idle", self._state.idle_for(board))
        window_kwargs.setdefault("others_idle", self._state.others_idle)
        with EnergyWindow(board, **window_kwargs) as w:
            yield w
        self._state.record(self._item, w.result, self._budget)

    def board(self, device: int | str | None = None):
        """The board a window on ``device`` meters (to drive a simulated one); the marker's by default.

        Fails the test when ``device`` is another board than the marker's, whose budget judges it.
        """
        __tracebackhide__ = True  # a skip without a GPU is reported at the test's line
        marked = self._budget.device if self._budget is not None else None
        board = self._state.board(device if device is not None else marked)
        if device is not None and self._budget is not None:
            # energy(device=1) under a marker of board 0 metered the idle board and passed
            # (an adversarial review, 2026-12-06)
            budgeted = self._state.board(marked)
            # simulated boards all take one UUID: there, only the one board object is the marker's
            simulated = board.identity().simulated
            if board is not budgeted and (simulated or board.identity().uuid != budgeted.identity().uuid):
                pytest.fail(
                    f"energy(device={device!r}) meters {board.identity().short}, but this test's energy "
                    f"marker budgets {budgeted.identity().short}: leave device= out, or give the marker's",
                    pytrace=False,
                )
        return board

    @property
    def results(self) -> list:
        """This test's finished windows' Measurements, in order."""
        return [e.measurement for e in self._state.entries if e.nodeid == self._item.nodeid]


def _check_keywords(window_kwargs: dict) -> None:
    """Fail the test in one line on a keyword EnergyWindow does not take.

    It had been a TypeError deep in the plugin; a budget given here, ``energy(max_mj_per_call=40)``,
    is the likely slip.
    """
    __tracebackhide__ = True
    import inspect

    from nvmeter.meter.window import EnergyWindow

    taken = set(inspect.signature(EnergyWindow.__init__).parameters) - {"self", "device", "devices"}
    unknown = sorted(set(window_kwargs) - taken)
    if unknown:
        marked = "max_mj_per_call" in unknown
        hint = " (a budget goes on the marker: @pytest.mark.energy(max_mj_per_call=...))" if marked else ""
        pytest.fail(
            f"energy(): unknown keyword(s) {', '.join(unknown)}{hint}; it takes device and "
            f"EnergyWindow's {', '.join(sorted(taken))}",
            pytrace=False,
        )


@pytest.fixture
def energy(request) -> EnergyMeter:
    """Meter blocks of a test: an :class:`EnergyMeter`, a context manager per block."""
    return EnergyMeter(request)


@pytest.fixture
def energy_board(request):
    """The board the ``energy`` marker meters (its ``device``, else index 0); skips without a GPU."""
    budget = _budget(request.node)
    return _state(request.config).board(budget.device if budget else None)
