"""How a command's process ends (cli.launch.end_process), in child processes: with its
status, without the interpreter's teardown (a garbage cycle left at exit is not
collected: its finalizer does not print) but with everything written flushed (stdout,
stderr, a logging handler's file) and the atexit hooks run (libraries clean up there)."""
import pathlib
import subprocess
import sys

import pytest

CHILD = r"""
import atexit, gc, logging, sys
from transformer_tf.cli.launch import end_process
gc.disable()  # the cycle below stays until the teardown's collection, if there is one

class Cycle:
    def __del__(self):
        print("|collected", end="", flush=True)

cycle = Cycle()
cycle.itself = cycle
del cycle
atexit.register(lambda: print("|hook", end=""))  # left in the buffer too
log = logging.getLogger("child")
log.addHandler(logging.FileHandler(sys.argv[2], delay=True))
sys.stdout.write("written")            # left in the buffers: end_process must flush them
sys.stderr.write("warned")
log.warning("logged")
end_process(None if sys.argv[1] == "None" else int(sys.argv[1]))
"""


def end_child(status, tmp_path: pathlib.Path):
    log_file = tmp_path / "child.log"
    done = subprocess.run([sys.executable, "-c", CHILD, str(status), str(log_file)],
                          capture_output=True, text=True, timeout=60)
    return done, log_file.read_text()


@pytest.mark.parametrize("status, expected", [(0, 0), (2, 2), (None, 0), (143, 143),
                                              (130, 130)])
def test_a_command_leaves_at_once_with_everything_written(status, expected, tmp_path):
    done, logged = end_child(status, tmp_path)
    assert done.returncode == expected
    assert done.stdout == "written|hook"  # no teardown: the cycle was not collected
    assert done.stderr == "warned"
    assert logged == "logged\n"


def test_the_child_tears_down_when_it_ends_as_usual(tmp_path):
    """The check above can fail: the same child ending with sys.exit collects its cycle."""
    log_file = tmp_path / "child.log"
    child = CHILD.replace("end_process(", "sys.exit(")
    done = subprocess.run([sys.executable, "-c", child, "0", str(log_file)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "written|hook|collected"


def test_a_launcher_runs_its_commands_main():
    from transformer_tf.cli import launch
    from transformer_tf.cli.train import main

    assert launch.train.main is main
    with pytest.raises(AttributeError, match="no command module 'nonexistent'"):
        launch.nonexistent  # noqa: B018 -- the attribute access is the test
