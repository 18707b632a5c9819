"""A model's labels, kept beside its checkpoints as labels.txt (`LABELS_FILE`): chosen
once (`resolve_labels`: `--labels`, the saved ones, or the training file's), written by
the first training run (`save_labels`), required without training
(`check_labels_known`).
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.errors import UsageError
from albert_tf.tasks.options import TaskOptions

LABELS_FILE = "labels.txt"  # beside the checkpoints: the model's labels, one per line


def saved_labels(model_path) -> list[str] | None:
    """The labels.txt kept beside a model (`model_path`: its directory, or a checkpoint
    in it), or None where there is none."""
    model_path = os.fspath(model_path)
    directory = model_path if tf.io.gfile.isdir(model_path) else os.path.dirname(model_path)
    path = os.path.join(directory, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    return fileio.read_bytes(path).decode("utf-8").splitlines()


def resolve_labels(options: TaskOptions, output_dir: str, discover) -> list[str]:
    """A model's labels: `--labels`, else the labels.txt of a model in `output_dir`,
    else `discover()` (the training file's). A training run whose labels differ from
    those already saved is refused (they would not fit its checkpoints). Nothing is
    written: `save_labels` keeps them once the data is checked."""
    path = os.path.join(output_dir, LABELS_FILE)
    saved = saved_labels(output_dir) if tf.io.gfile.isdir(output_dir) else None
    if options.labels:
        labels = list(options.labels)
    elif saved is not None:
        labels = saved
    else:
        labels = list(discover())
    if len(set(labels)) != len(labels) or not labels:
        raise UsageError(f"the labels must be distinct and not empty: {labels}")
    if options.do_train and saved is not None and saved != labels:
        raise UsageError(
            f"{path} holds other labels ({', '.join(saved)}) than this run's "
            f"({', '.join(labels)}): use another --output_dir")
    logging.info("labels: %s", ", ".join(labels))
    return labels


def save_labels(options: TaskOptions, output_dir: str, labels: list[str]) -> None:
    """A training run's labels as labels.txt (atomically), unless it is there."""
    path = os.path.join(output_dir, LABELS_FILE)
    if options.do_train and not tf.io.gfile.exists(path):
        fileio.write_text_atomically(path, "".join(f"{label}\n" for label in labels))


def check_labels_known(options: TaskOptions) -> None:
    """Without --do_train, the labels come from --labels or the labels.txt of the model
    in --output_dir: a UsageError when neither is there."""
    path = os.path.join(options.output_dir or "", LABELS_FILE)
    if not options.do_train and not options.labels and not tf.io.gfile.exists(path):
        raise UsageError(f"no {LABELS_FILE} in --output_dir={options.output_dir}: "
                         f"give --labels")
