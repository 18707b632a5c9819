"""Your own task in one file (`--task_module`, `albert_tf.tasks`): the README's example
(examples/mean_pool_classifier.py), copied to a folder outside the package, trained,
evaluated, predicted and exported through the installed `albert-run-classifier`."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import CheckpointError, convert, tasks
from albert_tf.apps import classifier, common
from tests.helpers.forked import run_installed, run_python
from tests.helpers.scripts import ROOT, SPM, serve_text
from tests.helpers.scripts import read_results as results
from tests.helpers.tiny import write_tiny_config
from tests.test_multi_label import write_splits
from tests.test_run_classifier import easy_rows

EXAMPLE = ROOT / "examples" / "mean_pool_classifier.py"


def test_a_task_in_a_file_of_its_own_runs_through_the_installed_command(tmp_path):
    folder = tmp_path / "my_project"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "my_task.py")
    write_splits(folder, [("train", 300), ("dev", 60), ("test", 6)], easy_rows, 5,
                 lambda text, label: {"review": text, "label": label})
    config = write_tiny_config(folder)
    out = folder / "out"
    command = ["--task_module=my_task.py", "--text_key=review",
               *(f"--{s}_file={s}.jsonl" for s in ("train", "dev", "test")),
               "--do_train", "--do_eval", "--do_predict", f"--albert_config_file={config}",
               f"--spm_model_file={SPM}", f"--output_dir={out}", "--max_seq_length=16",
               "--train_batch_size=16", "--train_step=150", "--warmup_step=10",
               "--save_checkpoints_steps=150", "--iterations_per_loop=150",
               "--learning_rate=3e-3", f"--export_dir={out / 'export'}"]
    result = run_installed("albert-run-classifier", command, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    assert results(out / "best_trial.txt")["eval_accuracy"] >= 0.9  # chance is 0.5
    assert (out / "labels.txt").read_text() == "neg\npos\n"
    head = dict(tf.train.list_variables(str(out / "model.ckpt-best")))
    assert head["cls/mean_pool/dense/kernel"] == [16, 2]
    predicted = [json.loads(line) for line in
                 (out / "mean_pool_predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predicted] == [f"test-{i}" for i in range(6)]
    # The export answers raw text as the predictions (its own serving kind).
    texts = [json.loads(line)["review"]
             for line in (folder / "test.jsonl").read_text().splitlines()]
    served = serve_text(out / "export" / "1", text_a=texts)
    assert [["neg", "pos"][i] for i in served["predictions"]] == [p["label"] for p in predicted]
    # `convert` knows the model by its registered head, and writes Google's layout.
    result = run_python(
        ["-m", "albert_tf.convert", "--task_module=my_task.py",
         f"--input={out / 'model.ckpt-best'}", f"--albert_config_file={config}",
         "--output=google", "--to=google"], cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    tasks.load_task_module(EXAMPLE)  # its model, in this process
    model, _ = convert.load(folder / "google")
    assert type(model).__name__ == "MeanPoolClassifier" and model.num_labels == 2
    assert model.load_report.missing == []
    np.testing.assert_array_equal(
        model.dense.kernel.numpy(),
        tf.train.load_variable(str(out / "model.ckpt-best"), "cls/mean_pool/dense/kernel"))
    with pytest.raises(CheckpointError, match="has no Hugging Face counterpart"):
        convert.convert(folder / "google", tmp_path / "hf")


def test_a_task_module_must_name_its_task(tmp_path):
    (tmp_path / "none.py").write_text("X = 1\n")
    with pytest.raises(tasks.TaskModuleError, match="must name its albert_tf.tasks.Task "
                                                    "subclass TASK"):
        tasks.load_task_module(tmp_path / "none.py")
    (tmp_path / "nameless.py").write_text(
        "from albert_tf import tasks\nclass T(tasks.Task):\n    metric = 'f1'\nTASK = T\n")
    with pytest.raises(tasks.TaskModuleError, match="T.name must be a non-empty name"):
        tasks.load_task_module(tmp_path / "nameless.py")
    with pytest.raises(tasks.TaskModuleError, match="is not a file"):
        tasks.load_task_module(tmp_path / "missing.py")
    assert issubclass(tasks.TaskModuleError, common.user_errors())


def test_the_task_module_is_found_before_absl_parses_flags():
    assert tasks.task_module_in(["--do_train", "--task_module=a/b.py"]) == "a/b.py"
    assert tasks.task_module_in(["--task_module", "b.py", "--x=1"]) == "b.py"
    assert tasks.task_module_in(["--task_modules=b.py"]) is None


def test_task_name_and_task_module_must_agree():
    with pytest.raises(common.UsageError, match="--task_name=other, but --task_module=.* "
                                                "is the task 'mean_pool'"):
        classifier.task_class({"task_module": str(EXAMPLE), "task_name": "other"})
    assert classifier.task_class({"task_name": "MRPC"}).__name__ == "ClassificationTask"
    assert classifier.task_class({"task_name": "multi_label"}).name == "multi_label"


def test_every_tasks_data_error_is_one_kind_the_scripts_report():
    from albert_tf.data.glue import GlueDataError
    from albert_tf.data.multiple_choice import ChoiceDataError
    from albert_tf.data.ner import NerDataError
    from albert_tf.data.pretraining import PretrainingDataError
    from albert_tf.data.squad import SquadError
    from albert_tf.data.tabular import TableDataError

    for error in (GlueDataError, ChoiceDataError, NerDataError, PretrainingDataError,
                  SquadError, TableDataError):
        assert issubclass(error, tasks.DataError)
    assert issubclass(tasks.DataError, common.user_errors())
