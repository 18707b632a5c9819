"""Running the repository's absl scripts as a user would, for the end-to-end tests."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPM = str(FIXTURES / "spm" / "albert_en_30k_reconstructed.model")


def run_script(script: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    """`python <script> args...` from the repository root; asserts success by default."""
    result = subprocess.run([sys.executable, str(ROOT / script), *map(str, args)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def read_results(path: pathlib.Path) -> dict[str, float]:
    """The `key = value` lines of an eval_results.txt."""
    return {k: float(v) for k, v in (line.split(" = ")
                                     for line in path.read_text().splitlines())}
