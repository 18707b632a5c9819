"""How the benchmarks start their child processes: `run(command, ...)`, with the
arguments of `subprocess.run` that they use.

A benchmark's figures come from new interpreters (a fresh process per row or per
setting: nothing imported, traced or allocated before it). Under the test suite, whose
harness tests check the benchmarks' plumbing and time nothing, a child would spend about
5 of its ~8 CPU seconds importing NumPy, TensorFlow and Keras: there the suite's fork
server is named in the environment (ALBERT_TF_FORK_SERVER, `tests/helpers/forked.py`),
and a `python` child is forked from its interpreter, which has imported those three and
nothing of albert_tf (a child that sets a variable read at import still gets a new
interpreter). The output comes back as `subprocess.run` gives or passes it on.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:
    sys.path.append(REPOSITORY)
from tests.helpers.forked import SERVER_VARIABLE, run_python  # noqa: E402  (stdlib only)


def run(command, *, check: bool = False, timeout: float | None = None, cwd=None,
        env: dict | None = None, stdout=None, stderr=None,
        capture_output: bool = False, text: bool = False) -> subprocess.CompletedProcess:
    """`subprocess.run(command, ...)`; forked (see above) where the test suite offers it
    and `command` runs this Python. Text output only, in that case."""
    server = (env if env is not None else os.environ).get(SERVER_VARIABLE)
    streams = (stdout, stderr)
    forkable = server and command[0] == sys.executable and all(
        where in (None, subprocess.PIPE, subprocess.DEVNULL) for where in streams) and (
        text or not (capture_output or subprocess.PIPE in streams))
    if not forkable:
        return subprocess.run(command, check=check, timeout=timeout, cwd=cwd, env=env,
                              stdout=stdout, stderr=stderr, capture_output=capture_output,
                              text=text)
    done = run_python(command[1:], cwd=cwd, env=env, timeout=timeout or 24 * 3600)
    kept = {}
    for name, where, stream in (("stdout", stdout, sys.stdout),
                                ("stderr", stderr, sys.stderr)):
        value = getattr(done, name)
        if capture_output or where == subprocess.PIPE:
            kept[name] = value
        else:
            kept[name] = None
            if where is None:  # passed on, as a child writing to this process's stream
                stream.write(value)
                stream.flush()
    done = subprocess.CompletedProcess(list(command), done.returncode, **kept)
    if check:
        done.check_returncode()
    return done
