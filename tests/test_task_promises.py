"""A task's promises are checked before the work: its `metric` among what its
`metrics()` returns (on the first dev batch, before training), and a `metric_goal` that
is "max" or "min" (tests/test_task_registration.py runs a task whose lowest error picks
the best checkpoint)."""


import pytest

from albert_tf import tasks
from tests.helpers.scripts import ROOT, SPM, run_script
from tests.helpers.tiny import write_tiny_config
from tests.test_multi_label import write_splits
from tests.test_run_classifier import easy_rows

EXAMPLE = (ROOT / "examples" / "mean_pool_classifier.py").read_text()


def variant(folder, name, metric, goal):
    """The README's example with another metric: the mean probability of the first
    label (it moves with every step), `metric_goal` `goal`."""
    text = EXAMPLE.replace('    metric = "eval_accuracy"\n', (
        f"    metric = {metric!r}\n    metric_goal = {goal!r}\n"))
    data = "    class Data(tasks.Task.Data):"
    text = text.replace(data, data + "\n        eval_outputs = (names.PREDICTIONS, "
                        "names.PROBABILITIES)\n", 1)
    text = text.replace('        return {"eval_accuracy": ', (
        '        return {"first_label_probability": float(np.mean(\n'
        '            outputs[names.PROBABILITIES][:, 0])),\n'
        '                "eval_accuracy": '))
    assert "first_label_probability\": float" in text and "metric_goal" in text
    assert "eval_outputs = (names.PREDICTIONS" in text
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    folder = tmp_path_factory.mktemp("project")
    write_splits(folder, [("train", 64), ("dev", 24)], easy_rows, 7,
                 lambda text, label: {"text": text, "label": label})
    return folder


def command(folder, task_file, out, *extra):
    return ["run_classifier.py", f"--task_module={task_file}",
            f"--train_file={folder / 'train.jsonl'}", f"--dev_file={folder / 'dev.jsonl'}",
            "--do_train", "--do_eval", f"--albert_config_file={write_tiny_config(folder)}",
            f"--spm_model_file={SPM}", f"--output_dir={out}", "--max_seq_length=16",
            "--train_batch_size=8", "--eval_batch_size=8", "--learning_rate=1e-2",
            "--warmup_step=0", *extra]


def test_a_metric_its_task_does_not_return_stops_the_run_before_training(project):
    out = project / "never"
    result = run_script(*command(project, variant(project, "wrong", "f1", "max"), out,
                                 "--train_step=2"), check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        "error: MeanPoolTask.metric is 'f1', which its metrics() does not return (it "
        "returns 'eval_accuracy', 'first_label_probability'; checked on the first 8 dev "
        "examples before training)"]
    assert not out.exists()  # it created the directory, and removed it


def test_a_metric_goal_is_max_or_min(tmp_path):
    (tmp_path / "goal.py").write_text(
        "from albert_tf import tasks\n@tasks.register\nclass T(tasks.Task):\n"
        "    name = 't'\n    metric = 'error'\n    metric_goal = 'lowest'\n")
    with pytest.raises(tasks.TaskModuleError, match=r"T.metric_goal must be 'max' or 'min' "
                                                    r"\(which way 'error' is better\), got "
                                                    r"'lowest'"):
        tasks.load_task_module(tmp_path / "goal.py")
