"""The parameter-count command, run as a user runs it."""

from conftest import FIXTURE_DIR

from tests.helpers.forked import run_python


def run(*args):
    return run_python(["-m", "albert_tf.param_count", *args], timeout=120)


def test_prints_counts_and_the_papers_figures():
    result = run("albert_base_v2", "albert_xxlarge_v2", str(FIXTURE_DIR / "albert_config.json"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    base = next(line for line in lines if line.startswith("albert_base_v2"))
    assert "11,683,584" in base and "11,813,810" in base and base.split()[-3:] == [
        "11.7M", "11.8M", "12M"]
    xxlarge = next(line for line in lines if line.startswith("albert_xxlarge_v2"))
    assert xxlarge.split()[-3:] == ["222.6M", "223.2M", "235M"]
    assert any(line.startswith(str(FIXTURE_DIR)) for line in lines)
    assert "arXiv:1909.11942" in result.stdout


def test_lists_every_shipped_config_by_default():
    result = run()
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("albert_") for line in result.stdout.splitlines()) == 12


def test_bad_config_is_an_error_naming_it(tmp_path):
    result = run(str(tmp_path / "missing.json"))
    assert result.returncode == 2
    assert f"albert config file {tmp_path}/missing.json does not exist" in result.stderr
