"""The repository's scripts and the installed `albert-*` commands are the same absl
programs."""

import importlib.metadata
import os
import pathlib
import re

import pytest

from tests.helpers.forked import run_installed, run_python
from tests.helpers.scripts import FIXTURES, SPM, one_line_error, run_script

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
        # Counts and sizes below their least: refused as they are read, nothing made.
        ("run_classifier.py", out, "--task_name=MRPC", "--do_train", "--train_step=0"):
            "error: --train_step=0: expected at least 1",
        ("run_classifier.py", out, "--task_name=MRPC", "--do_train",
         "--train_batch_size=-4"): "error: --train_batch_size=-4: expected at least 1",
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


def test_a_run_that_cannot_start_is_one_line_and_leaves_nothing(tmp_path):
    # Where it cannot write (/proc), or a TPU asked for where there is none: one line
    # naming the flag and what to do, after the data were read and before anything is
    # written; no directory made.
    from tests.helpers.tiny import write_tiny_config

    config = write_tiny_config(tmp_path)
    common = ["--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}", "--do_train",
              f"--spm_model_file={SPM}", f"--albert_config_file={config}",
              "--max_seq_length=32", "--train_step=2"]
    cases = {
        ("--output_dir=/proc/albert_tf_out",): (
            "error: --output_dir=/proc/albert_tf_out cannot be created (",
            "): give a directory this user can write"),
        (f"--output_dir={tmp_path / 'out'}", "--distribution_strategy=tpu", "--tpu=local"): (
            "error: --tpu=local: no TPU found there (",
            "on a machine without a TPU, leave --distribution_strategy=tpu out"),
    }
    for flags, (start, end) in cases.items():
        done = run_script("run_classifier.py", *common, *flags, check=False)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
        line = done.stderr.strip().splitlines()[-1]  # after the log of what was read
        assert line.startswith(start) and line.endswith(end), line
    assert not (tmp_path / "out").exists() and not os.path.exists("/proc/albert_tf_out")


def test_ctrl_c_stops_a_run_at_a_checkpoint_in_one_line(tmp_path):
    # SIGINT mid-training: the running steps end, their checkpoint is saved whole (no
    # temporary files), and one line says where it stopped and how to resume.
    import signal
    import time

    from tests.helpers.forked import start_python
    from tests.helpers.tiny import write_tiny_config

    out = tmp_path / "out"
    process = start_python([
        "run_classifier.py", "--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}",
        "--do_train", f"--spm_model_file={SPM}",
        f"--albert_config_file={write_tiny_config(tmp_path)}", "--max_seq_length=32",
        "--train_batch_size=4", "--train_step=100000", "--save_checkpoints_steps=2",
        "--iterations_per_loop=1", f"--output_dir={out}"], cwd=FIXTURES.parent.parent)
    deadline = time.time() + 180
    while not list(out.glob("ckpt-*.index")):
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    done = process.wait(timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    step = re.fullmatch(r"stopped: SIGINT: training stopped at step (\d+) of 100000 "
                        r"\(checkpoint: ckpt-(\d+)\); rerun the same command to resume",
                        line)
    assert step and step.group(1) == step.group(2), line
    assert (out / f"ckpt-{step.group(1)}.index").exists()
    assert not list(out.glob("*_temp*"))


def test_what_stops_a_run_midway_is_one_line():
    # A stop by signal says how to resume; a write the file system refuses (no space,
    # no permission) names the path and what to do; Ctrl-C outside the training steps
    # is one line too; an error of the program's own stays a traceback.
    import errno

    import pytest
    import tensorflow as tf

    from albert_tf.apps import runner
    from albert_tf.training.loop import TrainingStopped

    def raising(error):
        def run(options):
            raise error
        return run

    cases = {
        TrainingStopped("SIGTERM: training stopped at step 3 of 9 (checkpoint: ckpt-3); "
                        "rerun the same command to resume"):
            "stopped: SIGTERM: training stopped at step 3 of 9",
        OSError(errno.ENOSPC, "No space left on device", "/data/out/mrpc_train.tf_record"):
            "error: /data/out/mrpc_train.tf_record: No space left on device: check the "
            "disk there (free space, permissions, the directory still in place) and rerun "
            "the same command",
        PermissionError(errno.EACCES, "Permission denied", "/data/out/labels.txt"):
            "error: /data/out/labels.txt: Permission denied: check the disk there",
        tf.errors.ResourceExhaustedError(None, None, "/data/out/ckpt-4_temp/part-0; No "
                                         "space left on device"):
            "error: /data/out/ckpt-4_temp/part-0; No space left on device: check the disk",
        tf.errors.NotFoundError(None, None, "/data/out/eval_results.txt.tmp-1; No such "
                                "file or directory"):
            "error: /data/out/eval_results.txt.tmp-1; No such file or directory: check",
        KeyboardInterrupt(): runner.INTERRUPTED,
    }
    for error, start in cases.items():
        with pytest.raises(SystemExit) as stopped:
            runner.run_script(raising(error), lambda: None)
        assert str(stopped.value.code).startswith(start), stopped.value.code
        assert "\n" not in str(stopped.value.code)
    for error in (ValueError("a bug"), tf.errors.InvalidArgumentError(None, None, "a bug")):
        with pytest.raises(type(error)):
            runner.run_script(raising(error), lambda: None)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB file system of its own (tmpfs), where a run fills the disk; skipped where
    this user cannot mount one."""
    import subprocess

    mount = tmp_path / "small_disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_full_disk_is_one_line_naming_the_path_and_leaves_no_part(tmp_path, small_disk):
    # The run's output directory on a 2 MiB disk: whatever write fills it (a copy of the
    # tokenizer, the records, a checkpoint), one line names the path and what to do, and
    # no temporary file or half checkpoint stays behind.
    from tests.helpers.tiny import write_tiny_config

    out = small_disk / "out"
    done = run_script("run_classifier.py", "--task_name=MRPC",
                      f"--data_dir={FIXTURES / 'glue'}", "--do_train",
                      f"--spm_model_file={SPM}",
                      f"--albert_config_file={write_tiny_config(tmp_path)}",
                      "--max_seq_length=32", "--train_batch_size=4", "--train_step=4",
                      "--save_checkpoints_steps=2", f"--output_dir={out}", check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and str(out) in line, line
    assert "No space left on device" in line and "rerun the same command" in line, line
    left = [p.name for p in out.rglob("*")] if out.exists() else []
    assert not [name for name in left if ".tmp-" in name or "_temp" in name], left
