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
fork are the environment variables read at import or at a process's start
(TF_ENABLE_ONEDNN_OPTS, KERAS_BACKEND, MALLOC_*): a command that sets them otherwise has
its forked process start a new interpreter in its place (`IMPORT_TIME`; the server's
TF_CPP_MIN_LOG_LEVEL, which only sets how much is logged, stands). `fresh=True` starts one
from here. A command that a test signals itself is left running (`start_python`: a
`Forked`, as much of `subprocess.Popen` as the tests use); an installed console script
is its Python file run as its first line says (`run_installed`).

The server listens on a Unix socket that it names to its commands (`SERVER_VARIABLE`):
a command's own `python` commands go through the same server, as the benchmarks' child
processes do when a harness test runs a benchmark (`benchmarks/children.py`), and, where
the command's environment asks (`RELAY_VARIABLE`: the demo's test), every
`[sys.executable, ...]` child it starts.

    run_python(["script.py", "--flag=1"], cwd=..., env=..., timeout=300)
    -> subprocess.CompletedProcess (returncode, stdout, stderr as text)
"""

from __future__ import annotations

import atexit
import contextlib
import gc
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
    env = _command_environment(env)
    cwd = str(cwd or os.getcwd())
    if fresh:
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                timeout=timeout, cwd=cwd, env=env)
    else:
        result = Forked(args, cwd, env).wait(timeout)
    if check and result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])  # shown with the test's failure
        raise subprocess.CalledProcessError(result.returncode, result.args,
                                            result.stdout, result.stderr)
    return result


def run_installed(name: str, args, **kwargs) -> subprocess.CompletedProcess:
    """An installed console script of this environment (`<venv>/bin/<name>`: a Python
    file whose first line names this environment's python), run as that line says
    (`run_python` on the file: forked)."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
    assert first.startswith("#!") and os.path.samefile(first[2:], sys.executable), \
        (path, first)
    return run_python([path, *args], **kwargs)


def _command_environment(env) -> dict:
    env = dict(os.environ if env is None else env)
    # Plain TensorFlow ops for GELU, LayerNorm and the optimizer updates (the same math,
    # `albert_tf.modeling.fused`): a command here runs a few steps on a tiny model, where
    # compiling the XLA kernels for each batch shape is a quarter of its time. The
    # kernels themselves are tested in the pytest process (conftest's KERNEL_MODULES);
    # a command that wants them sets the variable to 1.
    env.setdefault("ALBERT_TF_XLA_KERNELS", "0")
    return env


class Forked:
    """A command forked by the server, as far as the tests use `subprocess.Popen`: its
    pid (the command's own process: signals go to it), `poll`, `send_signal`, and
    `wait`, which returns its `subprocess.CompletedProcess` (output as text)."""

    def __init__(self, args, cwd, env):
        import socket

        self.args = [sys.executable, *args]
        self._work = tempfile.mkdtemp(prefix="forked-")
        self._files = {name: os.path.join(self._work, name)
                       for name in ("stdout", "stderr", "status")}
        path = _start_server()
        request = dict(args=args, cwd=cwd, env={SERVER_VARIABLE: path, **env},
                       **self._files)
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect(path)
            connection.sendall((json.dumps(request) + "\n").encode())
            with connection.makefile() as replies:
                self.pid = int(replies.readline())

    def poll(self) -> int | None:
        """The exit status, or None while the command runs."""
        if not os.path.exists(self._files["status"]):
            return None
        with open(self._files["status"]) as f:
            return int(f.read())

    def send_signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, number)

    def wait(self, timeout: float = 300) -> subprocess.CompletedProcess:
        """Waits for the end (SIGKILL and TimeoutExpired after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while (returncode := self.poll()) is None:
            if time.monotonic() > deadline:
                self.send_signal(signal.SIGKILL)
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        outputs = []
        for name in ("stdout", "stderr"):
            with open(self._files[name], encoding="utf-8", errors="replace") as f:
                outputs.append(f.read())
        for path in self._files.values():
            os.remove(path)
        os.rmdir(self._work)
        return subprocess.CompletedProcess(self.args, returncode, *outputs)


def start_python(args, *, cwd=None, env=None) -> Forked:
    """`python *args` forked and left running (`Forked`); `run_python` waits for it."""
    return Forked([str(a) for a in args], str(cwd or os.getcwd()), _command_environment(env))


# The variable that names the server's socket to the processes it runs (a benchmark
# run by a test starts its own children through it: `benchmarks/children.py`).
SERVER_VARIABLE = "ALBERT_TF_FORK_SERVER"
# Read when NumPy, TensorFlow or Keras is imported, or by the C library at a process's
# start: a command that sets them otherwise than the server runs in a new interpreter,
# started by the command's forked process (TF_CPP_MIN_LOG_LEVEL only sets how much is
# logged: the server's value stands).
IMPORT_TIME = ("TF_ENABLE_ONEDNN_OPTS", "KERAS_BACKEND")
IMPORT_TIME_PREFIXES = ("MALLOC_",)
# A command whose environment sets this to 1 has `sys.executable` name the server's relay
# (`_relay`): a program that starts `python` children as `[sys.executable, ...]` (the
# demo its scripts) then has them forked too, their output streamed back through the
# relay, a new interpreter that imports nothing but this file.
RELAY_VARIABLE = "ALBERT_TF_FORK_PYTHON_CHILDREN"


def _start_server() -> str:
    """The socket of the server this process uses: the one named in its environment
    (a process run by the server), else its own, started on first use (and again if it
    died). Requests come on the socket, one connection each; the server stops when the
    process that started it closes its stdin."""
    global _server
    with _lock:
        named = os.environ.get(SERVER_VARIABLE)
        if named and _server is None and os.path.exists(named):
            return named
        if _server is None or _server.poll() is not None:
            directory = tempfile.mkdtemp(prefix="forked-server-")
            path = os.path.join(directory, "socket")
            _server = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), path], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(__file__),
                env=_server_environment())
            ready = _server.stdout.readline()
            assert ready.strip() == "ready", ready
            _server.socket_path = path
            os.environ[SERVER_VARIABLE] = path  # for the commands' own commands
            atexit.register(_stop_server, _server)
        return _server.socket_path


def _stop_server(server) -> None:
    """At this process's exit: the server stops taking requests, waits for its children
    and exits."""
    server.stdin.close()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()


def _server_environment() -> dict:
    """The server's: this process's, without PYTHONPATH (each command brings its own)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", SERVER_VARIABLE)}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


# ------------------------------------------------------------------ the server
def _serve(path: str) -> None:
    import importlib
    import selectors
    import socket

    for name in PRELOAD:
        importlib.import_module(name)
    # What the imports made lives as long as the server: out of the collector's reach
    # (`gc.freeze`), no command's full collection walks it again (0.25 s of a tiny
    # run_classifier.py run's 5 s) or writes to its pages, which the fork shares.
    gc.collect()
    gc.freeze()
    relay = _relay_program(path)
    with open(relay, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.abspath(__file__)}" '
                '--relay "$@"\n')
    os.chmod(relay, 0o755)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    serving = True
    while serving:
        for key, _ in events.select(timeout=1):
            if key.fileobj is sys.stdin:
                serving = bool(sys.stdin.readline())  # its end: stop
                continue
            connection, _ = listener.accept()
            with connection.makefile() as lines:
                request = json.loads(lines.readline())
            if os.fork() == 0:
                listener.close()
                _monitor(request, connection)
            connection.close()
        _reap()
    listener.close()
    os.remove(path)
    os.remove(_relay_program(path))
    os.rmdir(os.path.dirname(path))
    _reap(block=True)


def _reap(block: bool = False) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _monitor(request, connection) -> None:
    """In a child of the server: forks the command's process, tells the client its pid,
    waits for it and writes its exit status (a status file appears only whole)."""
    try:
        worker = os.fork()
        if worker == 0:
            connection.close()
            _run(request)
        connection.sendall(f"{worker}\n".encode())
        connection.close()
        _, status = os.waitpid(worker, 0)
        code = os.waitstatus_to_exitcode(status)
        temporary = request["status"] + ".tmp"
        with open(temporary, "w") as f:
            f.write(str(code))
        os.replace(temporary, request["status"])
    finally:
        os._exit(0)


def _needs_new_interpreter(env: dict) -> bool:
    """Whether `env` sets a variable read at import or at a process's start otherwise
    than this process was started with."""
    names = set(IMPORT_TIME) | {k for k in (*env, *os.environ)
                                if k.startswith(IMPORT_TIME_PREFIXES)}
    return any(env.get(name) != os.environ.get(name) for name in names)


def _run(request) -> None:
    """In the command's process: becomes `python *args` and exits with its status."""
    import runpy
    import traceback

    code = 1
    fresh = _needs_new_interpreter(request["env"])
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
        if os.environ.get(RELAY_VARIABLE) == "1":
            sys.executable = _relay_program(os.environ[SERVER_VARIABLE])
        if fresh:
            os.execv(sys.executable, [sys.executable, *args])
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


def _relay_program(server_path: str) -> str:
    return os.path.join(os.path.dirname(server_path), "relay")


def _relay(args) -> None:
    """`python *args` as a child of this process would run, forked by the server: its
    stdout and stderr streamed here as they come, SIGTERM and SIGINT passed on, and its
    exit status (a signal's too) made this process's."""
    process = start_python(args, env=os.environ)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _: process.send_signal(received))
    streams = {}
    while True:
        ended = process.poll() is not None
        for name, out in (("stdout", sys.stdout.buffer), ("stderr", sys.stderr.buffer)):
            if name not in streams and os.path.exists(process._files[name]):
                streams[name] = open(process._files[name], "rb")
            chunk = streams[name].read() if name in streams else b""
            if chunk:
                out.write(chunk)
                out.flush()
        if ended:
            break
        time.sleep(0.05)
    for stream in streams.values():
        stream.close()
    code = process.wait().returncode
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    sys.path[0] = ""  # this folder: each command puts its own first
    if sys.argv[1] == "--relay":
        _relay(sys.argv[2:])
    else:
        _serve(sys.argv[1])
