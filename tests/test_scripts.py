"""The repository's scripts and the installed `albert-*` commands are the same absl
programs."""

import importlib.metadata
import pathlib
import re

from tests.helpers.forked import run_installed, run_python
from tests.helpers.scripts import SPM, one_line_error, run_script

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


def test_bad_input_is_one_line_once(tmp_path):
    """A script's refusal is `error: <why>` on stderr once (not also as a log line), and
    one line where absl would print the usage and every flag's help before it."""
    out = f"--output_dir={tmp_path / 'out'}"
    refusals = {
        ("run_classifier.py", out, "--do_train"):
            "error: --task_name is required (or --task_module)",
        ("run_classifier.py", out, "--task_name=MRPC", "extra"):
            "error: unexpected arguments: extra",
        # A flag of another task of the script is refused, not ignored.
        ("run_classifier.py", out, "--task_name=MRPC", "--do_train",
         "--label_separator=|", "--high_only"):
            "error: --high_only, --label_separator: not an option of the task "
            "'classification'",
        ("run_ner.py", out, "--task_name=mrpc"):
            "error: --task_name=mrpc: this script runs ner, cluener, conll, or give "
            "--task_module",
        ("run_ner.py", out, "--do_train"):
            "error: give --spm_model_file (or --vocab_file for WordPiece)",
        ("run_squad.py", out): "error: nothing to do: give --do_train and/or --do_predict",
        ("run_pretraining.py", out):
            "error: nothing to do: give --do_train and/or --do_eval",
        ("create_pretraining_data.py", f"--input_file={tmp_path}/none/*.txt",
         f"--output_file={tmp_path}/x.tfrecord", f"--spm_model_file={SPM}"):
            f"error: input_file: no file matches '{tmp_path}/none/*.txt'",
        ("export_savedmodel.py", "--kind=encoder"):
            "error: give --export_dir (a SavedModel), --export_tflite (a LiteRT file), "
            "--export_preprocessor or several",
    }
    for (script, *args), line in refusals.items():
        assert one_line_error(run_script(script, *args, check=False)) == line
    convert = run_python(["-m", "albert_tf.convert", f"--input={tmp_path}",
                          f"--output={tmp_path / 'converted'}", "extra"])
    assert one_line_error(convert) == "error: unexpected arguments: extra"
    counted = run_python(["-m", "albert_tf.param_count", str(tmp_path / "none.json")])
    assert one_line_error(counted, status=2).startswith(
        f"error: albert config file {tmp_path / 'none.json'} does not exist")
    assert not (tmp_path / "out").exists()
