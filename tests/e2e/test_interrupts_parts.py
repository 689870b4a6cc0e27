"""Ctrl-C and SIGTERM stop what a run started (trainer_infra/sandbox/interrupts.py), in seconds and without a
control plane: each case runs a small driver in a session of its own (the terminal's process group) and signals it
the way a terminal or a CI runner does, then looks at what is left.

- ``run.py``'s sessions: a pytest session whose session fixture started a process in a session of its own (as the
  sandbox starts its control plane and node) and takes seconds to stop it; interrupted, the fixture's teardown runs
  to its end and nothing is left (``subprocess.call`` SIGKILLed the session 0.25 s after Ctrl-C instead);
- the Pulumi CLI (``PulumiProject``) with a stand-in for ``pulumi`` that starts a "plugin" in a process group of its
  own, as the engine does: one SIGINT, a wait for the CLI, and no plugin left even when the CLI never ends it;
- a stop (``uninterruptible``) that a signal reaches midway runs to its end, then the signal takes effect.

tests/e2e/test_interrupt.py does the same on the real install (root, a control plane, a node, ``pulumi up``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trainer_infra.sandbox.leftovers import processes_of
from trainer_infra.sandbox.versions import CHECKOUT

#: a pytest session (as run.py starts one) with a session fixture that starts a process in its own session, like
#: the sandbox's control plane, and needs seconds to stop it, like the real node's drain
SESSION_TEST = """
import time
from pathlib import Path

import pytest

from trainer_infra.sandbox.processes import terminate, spawn

pytestmark = pytest.mark.e2e
WORK = Path(__file__).parent / "work"


@pytest.fixture(scope="session")
def started():
    proc = spawn("sleeper", "0", Path("/bin/sleep"), ["600"], WORK / "sleeper.log", WORK)
    yield proc
    time.sleep(2)
    terminate(proc)
    (WORK / "stopped").write_text("the session fixture's teardown ran to its end")


def test_runs_until_interrupted(started):
    (WORK / "running").write_text(str(started.pid))
    time.sleep(600)
"""

#: a stand-in for the pulumi CLI: a "plugin" in a process group of its own (``pulumi`` starts its plugins so), then it
#: runs until stopped; ``polite``: on SIGINT it ends the plugin and exits after a second (an engine cancelling), else
#: it ignores SIGINT (an engine stuck in its cancellation, to be killed)
FAKE_PULUMI = """
import os, signal, subprocess, sys, time
from pathlib import Path

home = Path(os.environ["PULUMI_HOME"])
home.mkdir(parents=True, exist_ok=True)
plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], process_group=0)
(home / "plugin.pid").write_text(str(plugin.pid))
received = []


def cancel(signum, frame):
    received.append(signum)
    (home / "sigints").write_text(str(len(received)))


signal.signal(signal.SIGINT, cancel if sys.argv[1] == "polite" else signal.SIG_IGN)
(home / "running").write_text("yes")
while not received:
    time.sleep(0.1)
time.sleep(1)
plugin.kill()
plugin.wait()
sys.exit(255)
"""

#: drives ``PulumiProject._exec`` (what preview, up and destroy run through) with the stand-in
PULUMI_DRIVER = """
import os, sys
from pathlib import Path
from types import SimpleNamespace

from trainer_infra.sandbox import pulumi_stack

pulumi_stack.CANCEL_GRACE = 3.0
work = Path(sys.argv[1])
toolchain = SimpleNamespace(env=lambda: dict(os.environ))
project = pulumi_stack.PulumiProject(toolchain, work, kubeconfig=work / "kubeconfig", ca_bundle=work / "ca.crt")
try:
    project._exec([sys.executable, sys.argv[2], sys.argv[3]], check=True, timeout=600)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""

#: a stop that SIGINT and SIGTERM reach midway
STOP_DRIVER = """
import os, signal, sys, time

from trainer_infra.sandbox.interrupts import uninterruptible


@uninterruptible
def stop():
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)
    print("stop ran to its end", flush=True)


try:
    stop()
except KeyboardInterrupt:
    print("KeyboardInterrupt after the stop", flush=True)
    sys.exit(130)
print("no KeyboardInterrupt", flush=True)
"""


def start(tmp_path: Path, code: str, *args: str) -> subprocess.Popen[str]:
    """``code`` in a session of its own (signalling its group is a terminal's Ctrl-C), from the checkout."""
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=CHECKOUT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # a shell starts background commands with SIGINT ignored, which Python keeps: as at a terminal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_file(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until ``path`` holds something: ``write_text`` creates the file before it writes (a CI run read it empty)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size):
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited {proc.returncode} first:\n{proc.communicate()[0]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not written in {timeout} s")
        time.sleep(0.1)


def kill_left(work: Path) -> list[str]:
    """What is left of ``work`` (then killed, so that a failing case leaves nothing either)."""
    deadline = time.monotonic() + 5  # a process just killed may take a moment to leave /proc
    while (left := processes_of(work)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for line in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    return left


def alive(pid: int) -> bool:
    """Running (an orphan killed stays a zombie until whoever adopted it reaps it: that is not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ctrl_c(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGINT)


def sigterm_to_the_runner(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)


#: the two ways run.py runs sessions: named files (``run_sessions``), every session (``pipeline.Pipeline``: the
#: session in a lane's thread, its builds stood in for by "nothing to build")
DRIVERS = {
    "run_sessions": """
        import os, sys
        from tests.e2e import run

        sys.exit(run.run_sessions([[*{pytest_args!r}, {test_file!r}]], dict(os.environ)))
    """,
    "pipeline": """
        import os, sys
        from tests.e2e.pipeline import Pipeline, Plan
        from trainer_infra.sandbox.versions import VersionSet


        class NothingToBuild(Pipeline):
            def build_controlplane(self):
                return {{}}


        plan = Plan((), ({test_file!r},), (), (), tuple({pytest_args!r}), dict(os.environ))
        sys.exit(NothingToBuild(plan, VersionSet.from_env()).run())
    """,
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
@pytest.mark.parametrize(
    ("send", "exit_code"),
    [(ctrl_c, 130), (sigterm_to_the_runner, -signal.SIGTERM)],
    ids=["ctrl-c to the process group", "sigterm to run.py alone"],
)
def test_an_interrupted_session_stops_what_its_fixtures_started(
    tmp_path: Path, send: Callable[[subprocess.Popen[str]], None], exit_code: int, driver: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "test_session.py").write_text(SESSION_TEST)
    # run.py's own session loop; the e2e conftest as a plugin (it turns the session's SIGTERM into an interrupt)
    session = ["-p", "tests.e2e.conftest", "-m", "e2e", "-q", "-s", "--rootdir", str(tmp_path)]
    code = DRIVERS[driver].format(pytest_args=session, test_file=str(tmp_path / "test_session.py"))
    proc = start(tmp_path, code)
    try:
        wait_file(work / "running", proc)
        sleeper = int((work / "running").read_text())
        began = time.monotonic()
        send(proc)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - began
    finally:
        left = kill_left(work)
    assert proc.returncode == exit_code, out
    assert (work / "stopped").exists(), f"the fixture's teardown did not finish:\n{out}"
    assert took >= 2, f"run.py returned {took:.1f} s after the signal, before the session's 2 s teardown ended"
    assert not left, f"left running: {left}\n{out}"
    assert not alive(sleeper)


@pytest.mark.parametrize("mode", ["polite", "stuck"])
def test_an_interrupted_pulumi_run_is_cancelled_once_and_leaves_no_plugin(tmp_path: Path, mode: str) -> None:
    work = tmp_path / "project"
    work.mkdir()
    home = work / "home"
    fake = tmp_path / "pulumi.py"
    fake.write_text(FAKE_PULUMI)
    proc = start(tmp_path, PULUMI_DRIVER, str(work), str(fake), mode)
    try:
        wait_file(home / "running", proc)
        plugin = int((home / "plugin.pid").read_text())
        ctrl_c(proc)
        out, _ = proc.communicate(timeout=60)
    finally:
        left = kill_left(work)
    assert proc.returncode == 130 and "interrupted" in out, out
    assert not left, f"left running: {left}\n{out}"
    assert not alive(plugin)
    if mode == "polite":
        # exactly one SIGINT (a second one makes the engine give up at once), and the CLI's own end was waited for
        assert (home / "sigints").read_text() == "1"
        assert "exited 255" in out, out
    else:
        assert "exited -9" in out, out


def test_a_stop_runs_to_its_end_and_the_signal_takes_effect_after(tmp_path: Path) -> None:
    proc = start(tmp_path, STOP_DRIVER)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert out.splitlines()[-2:] == ["stop ran to its end", "KeyboardInterrupt after the stop"], out
