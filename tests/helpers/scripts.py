"""Running the repository's absl scripts as a user would, for the end-to-end tests
(`python script.py FLAGS...`, forked from an interpreter with TensorFlow already
imported: `tests.helpers.forked`)."""

import os
import pathlib
import re
import subprocess

from tests.helpers.forked import run_python

ROOT = pathlib.Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPM = str(FIXTURES / "spm" / "albert_en_30k_reconstructed.model")


def run_script(script: str, *args, check: bool = True,
               env: dict | None = None) -> subprocess.CompletedProcess:
    """`python <script> args...` from the repository root, with `env` added to this
    process's environment; asserts success by default."""
    result = run_python([ROOT / script, *args], timeout=300, cwd=ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


# What TensorFlow itself may write to stderr as a process starts: C++ log lines
# (cudart_stub.cc, cuda_platform.cc, ...) and absl-cpp's note before them.
TF_START_UP = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+\.cc:\d+\] |WARNING: All log "
                         r"messages before absl::InitializeLog\(\) is called")


def one_line_error(result: subprocess.CompletedProcess, status: int = 1) -> str:
    """The one line, `error: <why>`, with which a script refused its input: asserts exit
    status `status`, no traceback, that line the only one on stderr but TensorFlow's
    start-up lines (`TF_START_UP`), and its message there once."""
    assert result.returncode == status, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if not TF_START_UP.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    assert result.stderr.count(lines[0][len("error: "):]) == 1, result.stderr[-3000:]
    return lines[0]


def serve_text(version_dir, **texts) -> dict[str, list]:
    """Every output of an export's `serve_text` signature called with `texts` (input
    name -> list of strings), in a fresh process, as lists."""
    import json

    code = (
        "import json, sys\n"
        "import tensorflow_text  # registers the tokenizer ops\n"
        "import tensorflow as tf\n"
        "serve = tf.saved_model.load(sys.argv[1]).signatures['serve_text']\n"
        "out = serve(**{k: tf.constant(v) for k, v in json.loads(sys.argv[2]).items()})\n"
        "print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))\n")
    result = run_python(["-c", code, version_dir, json.dumps(texts)], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def read_results(path: pathlib.Path) -> dict[str, float]:
    """The `key = value` lines of an eval_results.txt."""
    return {k: float(v) for k, v in (line.split(" = ")
                                     for line in path.read_text().splitlines())}


def run_with_faults(script: str, *args, logical_cpus: int = 1, kill_at: int | None = None,
                    env: dict | None = None,
                    check: bool = True) -> subprocess.CompletedProcess:
    """`run_script` through `tests/helpers/faults.py`: on `logical_cpus` CPU devices,
    and SIGKILLed at step `kill_at` (asserted) or run to the end (asserted), with `env`
    added to this process's environment; `check=False` asserts nothing (a worker of a
    cluster whose peer is killed)."""
    fault = [f"--kill_at={kill_at}"] if kill_at is not None else []
    command = [ROOT / "tests" / "helpers" / "faults.py", pathlib.Path(script).stem,
               f"--logical_cpus={logical_cpus}", *fault, "--", *args]
    result = run_python(command, timeout=300, cwd=ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT),
                                 **(env or {})))
    expected = 0 if kill_at is None else -9  # SIGKILL
    if check:
        assert result.returncode == expected, result.stderr[-3000:]
    return result


def free_ports(count: int) -> list[int]:
    """`count` TCP ports free on the loopback interface now."""
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_cluster(run, count: int = 2, check: bool = True) -> list[subprocess.CompletedProcess]:
    """`run(tf_config)` for each worker of a cluster of `count` workers on loopback
    ports, all at once (`tf_config`: that worker's TF_CONFIG, JSON); asserts that every
    worker succeeded, the last first (a worker that fails first stops the others),
    unless `check` is False."""
    import json
    import threading

    workers = [f"127.0.0.1:{port}" for port in free_ports(count)]
    results = [None] * count

    def worker(index):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        results[index] = run(json.dumps(config))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index in reversed(range(count) if check else ()):
        assert results[index].returncode == 0, \
            f"worker {index}: " + results[index].stderr[-3000:]
    return results
