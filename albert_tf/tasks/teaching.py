"""What a teacher teaches a student of a task (`Task.Teaching`, the task's collaborator
for `--teacher_checkpoint`): the model output the student learns and its soft loss, and
the unlabeled text the teacher labels (`--transfer_file`, `--distill_augment`).

    class Teaching(Task.Teaching):     # inside a task that is distilled
        soft_loss = "softmax"          # of its logits, the default output

        def pseudo_label(self, example, teacher_output):
            example.features.feature["label_ids"].int64_list.value[:] = [
                int(np.argmax(teacher_output))]

A task whose `Teaching.soft_loss` is None (the default) is not distilled: its runs refuse
the distillation options. The driver makes one for the run, `task.teaching`, which holds
the task (`self.task`).
"""

from __future__ import annotations

from typing import Sequence

from albert_tf import names


class TaskTeaching:
    """The teaching collaborator of a task; see the module's docstring."""

    # The model output a student learns (the teacher's, cached once per training
    # record) and its soft loss: "softmax", "sigmoid", "regression" or, per labelled
    # position, "token_softmax" (`albert_tf.training.distillation.SOFT_LOSSES`); None:
    # the task is not distilled.
    output: str = names.LOGITS
    soft_loss: str | None = None

    def __init__(self, task):
        self.task = task

    def transfer_is_pair(self) -> bool | None:
        """--transfer_file: whether each of its lines is a pair of texts (tab-separated)
        or one text; None (the default): the task takes no transfer text."""
        return None

    def read_transfer(self, path: str) -> list | None:
        """--transfer_file read in the task's own format (its examples, checked before
        any work, for `write_transfer_records`); None (the default): the file is lines
        of text, as `transfer_is_pair` says."""
        return None

    def write_transfer_records(self, texts: Sequence, path: str) -> int:
        """Writes unlabeled texts ((text_a, text_b or None) each, or the examples of
        `read_transfer`) as the task's training records, their labels a placeholder
        that `pseudo_label` replaces; returns how many records (a text may make
        several: a token task's windows). Needed where `transfer_is_pair` is not None
        or `read_transfer` reads the file."""
        raise NotImplementedError(f"{type(self.task).__name__}.Teaching."
                                  "write_transfer_records")

    def pseudo_label(self, example, teacher_output) -> None:
        """Sets the label features of a transfer record (a `tf.train.Example`, changed
        in place) from the teacher's output on it (the `output`, a numpy row): what the
        labels' part of the loss learns there."""
        raise NotImplementedError(f"{type(self.task).__name__}.Teaching.pseudo_label")

    @classmethod
    def labels_texts(cls) -> bool:
        """Whether the task takes examples labelled by the teacher (it defines
        `pseudo_label`): --transfer_file and --distill_augment need it."""
        return cls.pseudo_label is not TaskTeaching.pseudo_label
