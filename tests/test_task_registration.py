"""A task is one registered object (issue 48): a task of one's own with a head of its own
(a bounded regression whose metric is better lower), written in a folder outside the
package with one registration (`@albert_tf.tasks.register`), goes through every door of
the installed commands: `--help` lists its flags; `albert-run-classifier` trains,
evaluates (the lowest error picks `model.ckpt-best`) and predicts; `albert-export
--task_module` exports the best checkpoint as a SavedModel whose serve_text answers what
the run predicted, and as a LiteRT file that answers the same; `convert --task_module`
knows its model from the checkpoint."""

import json
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import convert, tasks
from albert_tf.export import read_tflite_info, tflite_interpreter
from tests.helpers.forked import run_installed, run_python
from tests.helpers.scripts import ROOT, SPM, serve_text
from tests.helpers.scripts import read_results as results
from tests.helpers.tiny import write_tiny_config

RATING = ROOT / "tests" / "fixtures" / "task_modules" / "rating.py"
WORDS = ["good", "great", "fine", "bad", "awful", "poor", "plain", "film", "book", "meal"]


def write_ratings(folder, split: str, count: int, seed: int) -> list[str]:
    """JSON lines of texts with their 1-5 rating (`stars`): more praise, more stars."""
    rng = np.random.default_rng(seed)
    texts = []
    with open(folder / f"{split}.jsonl", "w") as f:
        for _ in range(count):
            words = list(rng.choice(WORDS, size=6))
            text = " ".join(words)
            stars = 1 + min(4, sum(w in ("good", "great", "fine") for w in words))
            f.write(json.dumps({"text": text, "stars": stars}) + "\n")
            texts.append(text)
    return texts


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("my_project")
    shutil.copy(RATING, folder / "rating.py")
    write_ratings(folder, "train", 64, 0)
    write_ratings(folder, "dev", 24, 1)
    texts = write_ratings(folder, "test", 5, 2)
    config = write_tiny_config(folder)
    out = folder / "out"
    result = run_installed("albert-run-classifier", [
        "--task_module=rating.py", "--score_key=stars",
        *(f"--{s}_file={s}.jsonl" for s in ("train", "dev", "test")),
        "--do_train", "--do_eval", "--do_predict", f"--albert_config_file={config}",
        f"--spm_model_file={SPM}", f"--output_dir={out}", "--max_seq_length=16",
        "--train_batch_size=16", "--train_step=12", "--warmup_step=2",
        "--save_checkpoints_steps=4", "--iterations_per_loop=4", "--learning_rate=1e-3"],
        cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return {"folder": folder, "out": out, "config": config, "texts": texts,
            "log": result.stderr}


def test_its_flags_are_in_help(tmp_path):
    shutil.copy(RATING, tmp_path / "rating.py")
    result = run_installed("albert-run-classifier", ["--task_module=rating.py", "--help"],
                           cwd=tmp_path)
    # (absl's --help exits with status 1)
    assert re.search(r"--score_key: rating: the JSON key of the 1-5 rating", result.stdout)


PYTHON_RUN = """
import json, sys
import rating  # the task file imported by its name, as a user's own code does
from albert_tf import tasks
from albert_tf.apps import classifier, driver

flags = json.loads(sys.argv[1])
# The one Python entry point finds the task of a file of one's own three ways: its
# options' class, --task_module (the same file: the same task, not a second one), its name.
same = classifier.task_class({"task_module": "rating.py"}) is rating.RatingTask
by_name = driver.resolve_task("rating", {}) is rating.RatingTask
listed = rating.RatingTask in tasks.fine_tuning()
best = classifier.run(rating.RatingTask.Options(**flags))
print(json.dumps([same, by_name, listed, best]))
"""


def test_a_python_run_trains_what_the_script_trained(trained, tmp_path):
    # The same settings from Python (the task's options, no flag) as the script was
    # given: the same dev errors at every checkpoint, the same best (the defaults the
    # script did not give are the task's own in both).
    folder = trained["folder"]
    options = dict(score_key="stars", train_file="train.jsonl", dev_file="dev.jsonl",
                   do_train=True, do_eval=True, albert_config_file=str(trained["config"]),
                   spm_model_file=str(SPM), output_dir=str(tmp_path / "out"),
                   max_seq_length=16, train_batch_size=16, train_step=12, warmup_step=2,
                   save_checkpoints_steps=4, iterations_per_loop=4, learning_rate=1e-3)
    result = run_python(["-c", PYTHON_RUN, json.dumps(options)], cwd=folder, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    same, by_name, listed, best = json.loads(result.stdout.splitlines()[-1])
    assert same and by_name and listed

    def what_was_read(log: str) -> list[str]:  # the data summary's lines, a split each
        return [line for line in log.splitlines() if line.startswith(("  train: ",
                                                                      "  dev: "))]

    # (logged from Python as by the script: absl at INFO unless a script set it; the
    # rows read, then the texts --max_seq_length cut, of each split)
    assert len(what_was_read(trained["log"])) == 4
    assert what_was_read(result.stderr) == what_was_read(trained["log"])
    assert results(tmp_path / "out" / "best_trial.txt") == \
        results(trained["out"] / "best_trial.txt")
    assert best["mean_absolute_error"] == pytest.approx(
        results(trained["out"] / "best_trial.txt")["mean_absolute_error"], rel=1e-6)


def test_the_run_keeps_the_checkpoint_of_the_lowest_error(trained):
    errors = {int(step): float(value) for step, value in re.findall(
        r"dev mean_absolute_error at step (\d+): ([0-9.e-]+)", trained["log"])}
    assert sorted(errors) == [4, 8, 12] and len(set(errors.values())) == 3
    best = results(trained["out"] / "best_trial.txt")
    assert best["global_step"] == min(errors, key=errors.get)
    assert best["mean_absolute_error"] == pytest.approx(min(errors.values()), rel=1e-5)
    head = dict(tf.train.list_variables(str(trained["out"] / "model.ckpt-best")))
    assert head["cls/rating/dense/kernel"] == [16, 1]


def test_its_exports_answer_what_the_run_predicted(trained):
    folder, out = trained["folder"], trained["out"]
    predicted = [json.loads(line)["rating"] for line in
                 (out / "rating_predictions.jsonl").read_text().splitlines()]
    assert all(1 <= p <= 5 for p in predicted)
    result = run_installed("albert-export", [
        "--task_module=rating.py", f"--checkpoint={out / 'model.ckpt-best'}",
        f"--albert_config_file={trained['config']}", f"--spm_model_file={SPM}",
        "--max_seq_length=16", f"--export_dir={folder / 'serving'}",
        f"--export_tflite={folder / 'rating.tflite'}", "--tflite_text"], cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((folder / "serving" / "1" / "assets.extra" /
                       "export_info.json").read_text())
    assert info["kind"] == "bounded_rater" and info["is_pair"] is False
    served = serve_text(folder / "serving" / "1", text_a=trained["texts"])
    np.testing.assert_allclose(served["predictions"], predicted, atol=1e-5)
    import tensorflow_text  # noqa: F401  (the LiteRT file's tokenizer op)

    path = folder / "rating.tflite"
    assert list(read_tflite_info(path)["signatures"]["serve_text"]["inputs"]) == ["text_a"]
    runner = tflite_interpreter(path).get_signature_runner("serve_text")
    lite = runner(text_a=np.asarray(trained["texts"], object))
    np.testing.assert_allclose(lite["predictions"], predicted, atol=1e-4)


def test_convert_knows_its_model(trained):
    folder, out = trained["folder"], trained["out"]
    result = run_python(
        ["-m", "albert_tf.convert", "--task_module=rating.py",
         f"--input={out / 'model.ckpt-best'}", f"--albert_config_file={trained['config']}",
         "--output=google", "--to=google"], cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    tasks.load_task_module(RATING)  # its model, in this process
    model, _ = convert.load(folder / "google")
    assert type(model).__name__ == "BoundedRater" and model.load_report.missing == []
    np.testing.assert_array_equal(
        model.dense.kernel.numpy(),
        tf.train.load_variable(str(out / "model.ckpt-best"), "cls/rating/dense/kernel"))


def _documented(text: str) -> dict[str, list[str] | None]:
    """README entries `name`: or `name(a, b)`: -> None or the parameters."""
    return {name: [p.strip() for p in params[1:-1].split(",") if p.strip()] if params
            else None for name, params in re.findall(r"`([A-Za-z_]+)(\([^`]*\))?`:", text)}


def test_the_readme_task_api_is_the_real_one():
    import dataclasses
    import inspect

    from albert_tf.export import ServingKind
    from albert_tf.tasks.data import TaskData
    from albert_tf.tasks.teaching import TaskTeaching
    from tests.test_readme import README as readme  # every page of the documentation

    section = readme[readme.index("#### The task API"):readme.index("A model is a subclass")]
    task_part, rest = section.split("Its `Data`")
    data_part, rest = rest.split("Its `Teaching`")
    teaching_part, kind_part = rest.split("A `ServingKind`")

    def real(klass) -> dict:
        found = {}
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            function = value.__func__ if isinstance(value, classmethod) else value
            found[name] = [p for p in inspect.signature(function).parameters
                           if p not in ("self", "cls")] if callable(function) and not \
                isinstance(function, type) else None
        return found

    assert _documented(task_part) == real(tasks.Task)
    assert len(real(tasks.Task)) <= 15  # a task is its own knowledge; the rest is Data's
    assert _documented(data_part) == real(TaskData)
    assert _documented(teaching_part) == real(TaskTeaching)
    assert sorted(_documented(kind_part)) == sorted(
        f.name for f in dataclasses.fields(ServingKind))
