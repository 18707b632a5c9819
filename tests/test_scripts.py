"""The repository's scripts and the installed `albert-*` commands are the same absl
programs."""

import importlib.metadata
import pathlib
import re

from tests.helpers.forked import run_installed

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ("run_classifier", "run_ner", "run_squad", "run_pretraining",
           "create_pretraining_data", "export_savedmodel")


def installed_commands() -> dict[str, str]:
    """command -> "module:function" of this package's console scripts."""
    points = importlib.metadata.distribution("albert_tf").entry_points
    return {p.name: p.value for p in points if p.group == "console_scripts"}


def test_every_script_is_an_installed_command():
    commands = installed_commands()
    for script in SCRIPTS:
        text = (ROOT / f"{script}.py").read_text()
        module = re.search(r"from (albert_tf\.scripts\.\w+) import run", text).group(1)
        command = "albert-" + script.replace("_", "-").replace("export-savedmodel", "export")
        assert commands[command] == f"{module}:run", command
        assert f"installed as `{command}`" in " ".join(text.split())


def test_an_installed_command_runs_the_program():
    shown = run_installed("albert-run-ner", ["--help"]).stdout  # (absl's: exit status 1)
    assert "Fine-tunes ALBERT for token classification" in shown  # the script's usage
    for flag in ("--train_file", "--labels", "--albert_config_file", "--export_dir"):
        assert flag in shown
    missing = run_installed("albert-run-ner", ["--do_train"])
    assert missing.returncode != 0 and "--output_dir" in missing.stderr
