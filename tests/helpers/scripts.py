"""Running the repository's absl scripts as a user would, for the end-to-end tests
(`python script.py FLAGS...`, forked from an interpreter with TensorFlow already
imported: `tests.helpers.forked`)."""

import os
import pathlib
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


def read_results(path: pathlib.Path) -> dict[str, float]:
    """The `key = value` lines of an eval_results.txt."""
    return {k: float(v) for k, v in (line.split(" = ")
                                     for line in path.read_text().splitlines())}


def run_with_faults(script: str, *args, logical_cpus: int = 1,
                    kill_at: int | None = None) -> subprocess.CompletedProcess:
    """`run_script` through `tests/helpers/faults.py`: on `logical_cpus` CPU devices,
    and SIGKILLed at step `kill_at` (asserted) or run to the end (asserted)."""
    fault = [f"--kill_at={kill_at}"] if kill_at is not None else []
    command = [ROOT / "tests" / "helpers" / "faults.py", pathlib.Path(script).stem,
               f"--logical_cpus={logical_cpus}", *fault, "--", *args]
    result = run_python(command, timeout=300, cwd=ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT)))
    expected = 0 if kill_at is None else -9  # SIGKILL
    assert result.returncode == expected, result.stderr[-3000:]
    return result
