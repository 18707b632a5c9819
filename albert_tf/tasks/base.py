"""The task API: what a fine-tuning task is, for the one driver (`albert_tf.apps.driver`)
to train, evaluate, predict and export it.

A task is a subclass of `Task` registered once with `@albert_tf.tasks.register`, in the
package (`albert_tf.tasks.multi_label`) or in a file of your own that the scripts load
with `--task_module=path/to/my_task.py`. A task is its own knowledge: its `name`,
`metric` and `metric_goal`; its `serving_kinds` (each naming its model class); its
options (`Options`, the scripts' flags, with their checks); how it reads a split
(`read`) and what an example's record holds (`features`); its model (`build_model`) and
loss (`objective`); its results (`metrics`, `write_predictions`, `prepare_model`) and
what its export takes (`export_options`). Two collaborators, each a class a task
overrides only where it must, do the rest: `Data` (`albert_tf.tasks.data`: the split
files, the labels of the training split, records, caches, batches, training steps) and
`Teaching` (`albert_tf.tasks.teaching`: what a teacher teaches a student of the task).
The driver owns everything else: flags common to every run, the tokenizer, the loop on
tf.distribute, checkpoints, the dev-set evaluation of every kept checkpoint with
`model.ckpt-best`, and the exports. What a task says is "The task API" of
docs/your-own-task.md (tests/test_task_registration.py holds it to these classes).
"""

from __future__ import annotations

from typing import Any, Mapping

from albert_tf.tasks.data import TaskData
from albert_tf.tasks.options import TaskOptions
from albert_tf.tasks.teaching import TaskTeaching


class Task:
    """Base of every fine-tuning task; see the module's docstring. Made whole by the
    driver for one run, with the run's `options` (an instance of the task's `Options`,
    or a mapping that makes one) and its `tokenizer`: what the run derives from its data
    is in the options before the task is made (the labels of a task with labels,
    `Data.has_labels`, as `options.labels`; `Data.derived_options`), and nothing is set
    on a task afterwards."""

    # The task's options: a frozen dataclass (`albert_tf.tasks.options`) deriving from
    # `TaskOptions`, or from `FineTuningOptions` where the task reads its data its own
    # way; its fields are the scripts' flags, its `validate` their checks. A task with
    # options of its own declares
    #     @dataclasses.dataclass(frozen=True)
    #     class Options(Task.Options):
    #         threshold: float = option(0.5, "The flag's help.")
    Options: type = TaskOptions
    # Its collaborators (a task overrides them with `class Data(Task.Data): ...`).
    Data: type = TaskData
    Teaching: type = TaskTeaching

    name: str = ""
    metric: str = ""
    metric_goal: str = "max"  # or "min": which way `metric` is better
    # The serving kinds of its models (`albert_tf.export.ServingKind`, each naming its
    # model class): the first is the run's unless `__init__` picks another as
    # `self.serving_kind` (SQuAD v2.0's by --version_2_with_negative).
    serving_kinds: tuple = ()

    def __init__(self, options: Options | Mapping[str, Any], tokenizer=None):
        self.options = self.Options.build(options)
        self.serving_kind = self.serving_kinds[0] if self.serving_kinds else None
        self.tokenizer = tokenizer
        # `Data.has_labels`: --labels, a model's labels.txt or the training split's.
        labels = self.options.labels if isinstance(self.options, TaskOptions) else None
        self.labels: list[str] | None = list(labels) if labels else None
        self.data = self.Data(self)
        self.teaching = self.Teaching(self)

    # --------------------------------------------------------------------- the data
    def read(self, split: str, paths):
        """The split's data: a list of examples, or any object `Data.split_records`,
        `metrics` and `write_predictions` take."""
        raise NotImplementedError(f"{type(self).__name__}.read")

    def features(self, example) -> Mapping:
        """The record of an example: the three sequences (`self.data.pack(text_a,
        text_b)`) and what its loss and metrics read (a list of ints or floats each)."""
        raise NotImplementedError(f"{type(self).__name__}.features")

    # -------------------------------------------------------------------- the model
    def build_model(self, config):
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def objective(self):
        raise NotImplementedError(f"{type(self).__name__}.objective")

    # ------------------------------------------------------------------ the results
    def metrics(self, examples, outputs: Mapping) -> dict:
        raise NotImplementedError(f"{type(self).__name__}.metrics")

    def write_predictions(self, examples, outputs: Mapping, output_dir: str,
                          step: int) -> str | dict | None:
        """Writes the test split's predictions (of the model at training step `step`);
        returns the file written, or the results it scored on the test split (what a run
        with no dev split returns: SQuAD's EM / F1 of --predict_file)."""
        return None

    def prepare_model(self, model, output_dir: str, best: dict) -> None:
        """Called with the run's final model (the best checkpoint's, else the latest)
        before it predicts the test split and is exported, and with the dev results that
        picked it ({} without a dev split): a task keeps what it tuned on dev beside the
        model here (multi-label's threshold). `model` is None where the run neither
        predicts nor exports (it evaluated: no model is loaded for this). Every worker
        calls it."""

    def export_options(self) -> dict:
        """Arguments of `albert_tf.export.export_savedmodel` beside the model, the
        tokenizer and the labels (`is_pair`, ...)."""
        return {}
