"""`python ARGS...` for the tests, forked from an interpreter that has already imported
NumPy, TensorFlow and Keras, instead of a new interpreter each time.

Importing them costs about 4 CPU seconds, and the suite runs its scripts, exports and
fresh-process checks in about 140 Python processes (counted 2026-11-25): by that
estimate some 550 of the 1,850 CPU seconds of `make test` on 2 cores. With this helper
the suite went from 15.3 to 11.2 minutes on a 2-core AVX-512 machine. Each pytest worker
starts one server process (this file run as a program) that imports them once and, for
each request, forks a child that runs the command as `python` would: its own argv,
working directory, environment, stdin from /dev/null, stdout and stderr to files read
back as text, `__main__` from the script file, the module (`-m`) or the code (`-c`),
then what python does on exit (non-daemon threads joined, atexit functions), and the
exit status of `sys.exit`, of an uncaught exception (1, its traceback printed) or of a
signal (SIGKILL: -9, as `subprocess` reports it).

The child is as fresh as a new interpreter for what the tests check: nothing of
albert_tf is imported before the fork (a SavedModel served there has no Python model
code to lean on), and tensorflow_text is not preloaded, so a script that loads a
SavedModel with tokenizer ops still fails unless it imports tensorflow_text itself. The
server never runs a TensorFlow op: each child starts TensorFlow's runtime on its own
(its devices too: `tests/helpers/faults.py --logical_cpus`). What is fixed before the
fork are the environment variables read at import (TF_CPP_MIN_LOG_LEVEL,
TF_ENABLE_ONEDNN_OPTS, KERAS_BACKEND): a command that needs other values there runs with
`fresh=True`, a new interpreter. So do commands whose process the test signals itself
(they need a `subprocess.Popen`), and installed console scripts.

    run_python(["script.py", "--flag=1"], cwd=..., env=..., timeout=300)
    -> subprocess.CompletedProcess (returncode, stdout, stderr as text)
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

# Imported by the server before it forks: the costly part of every command's start, and
# what every command imports anyway.
PRELOAD = ("numpy", "tensorflow", "keras")

_server = None
_lock = threading.RLock()


def run_python(args, *, cwd=None, env=None, timeout: float = 300, fresh: bool = False,
               check: bool = False) -> subprocess.CompletedProcess:
    """`python *args` (args[0] a script, "-m", or "-c"), output captured as text;
    `fresh` starts a new interpreter instead of forking the preloaded one."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    # Plain TensorFlow ops for GELU, LayerNorm and the optimizer updates (the same math,
    # `albert_tf.fused`): a command here runs a few steps on a tiny model, where
    # compiling the XLA kernels for each batch shape is a quarter of its time. The
    # kernels themselves are tested in this process (test_fused, test_training_loop,
    # test_optimizers); a command that wants them sets the variable to 1.
    env.setdefault("ALBERT_TF_XLA_KERNELS", "0")
    cwd = str(cwd or os.getcwd())
    if fresh:
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                timeout=timeout, cwd=cwd, env=env)
    else:
        result = _forked(args, cwd, env, timeout)
    if check and result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])  # shown with the test's failure
        raise subprocess.CalledProcessError(result.returncode, result.args,
                                            result.stdout, result.stderr)
    return result


def _start_server():
    """This process's server, started on first use (and again if it died)."""
    global _server
    with _lock:
        if _server is None or _server.poll() is not None:
            _server = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(__file__),
                env=_server_environment())
            ready = _server.stdout.readline()
            assert ready.strip() == "ready", ready
            atexit.register(_stop_server, _server)
        return _server


def _stop_server(server) -> None:
    """At this process's exit: the server reads the end of its requests, waits for its
    children and exits."""
    server.stdin.close()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()


def _server_environment() -> dict:
    """The server's: this process's, without PYTHONPATH (each command brings its own)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _forked(args, cwd, env, timeout) -> subprocess.CompletedProcess:
    work = tempfile.mkdtemp(prefix="forked-")
    files = {name: os.path.join(work, name) for name in ("stdout", "stderr", "status")}
    request = dict(args=args, cwd=cwd, env=env, **files)
    with _lock:
        server = _start_server()
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        pid = int(server.stdout.readline())
    deadline = time.monotonic() + timeout
    while not os.path.exists(files["status"]):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
        time.sleep(0.02)
    with open(files["status"]) as f:
        returncode = int(f.read())
    outputs = []
    for name in ("stdout", "stderr"):
        with open(files[name], encoding="utf-8", errors="replace") as f:
            outputs.append(f.read())
        os.remove(files[name])
    os.remove(files["status"])
    os.rmdir(work)
    return subprocess.CompletedProcess([sys.executable, *args], returncode, *outputs)


# ------------------------------------------------------------------ the server
def _serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    requests = sys.stdin
    replies = sys.stdout
    replies.write("ready\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        monitor = os.fork()
        if monitor == 0:
            _monitor(request, replies)
        _reap()
    _reap(block=True)


def _reap(block: bool = False) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _monitor(request, replies) -> None:
    """In a child of the server: forks the command's process, tells the parent its pid,
    waits for it and writes its exit status (a status file appears only whole)."""
    try:
        worker = os.fork()
        if worker == 0:
            _run(request)
        replies.write(f"{worker}\n")
        replies.flush()
        _, status = os.waitpid(worker, 0)
        code = os.waitstatus_to_exitcode(status)
        temporary = request["status"] + ".tmp"
        with open(temporary, "w") as f:
            f.write(str(code))
        os.replace(temporary, request["status"])
    finally:
        os._exit(0)


def _run(request) -> None:
    """In the command's process: becomes `python *args` and exits with its status."""
    import runpy
    import traceback

    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            out = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        sys.stdin = open(0, closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        args = request["args"]
        # sys.path as python builds it: the script's folder ("" for -c, the working
        # directory for -m), PYTHONPATH, then the server's own (site-packages).
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        first = "" if args[0] == "-c" else os.getcwd() if args[0] == "-m" else \
            os.path.dirname(os.path.abspath(args[0]))
        sys.path[:] = [first, *extra, *sys.path[1:]]
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            runpy.run_path(args[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001  (reported as python reports it)
        traceback.print_exc()
        code = 1
    finally:
        # What python does on its way out: wait for non-daemon threads, run the atexit
        # functions, flush.
        for finish in (threading._shutdown, atexit._run_exitfuncs, sys.stdout.flush,
                       sys.stderr.flush):
            try:
                finish()
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
        os._exit(code)


if __name__ == "__main__":
    sys.path[0] = ""  # this folder: each command puts its own first
    _serve()
