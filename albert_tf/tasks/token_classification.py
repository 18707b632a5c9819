"""Token classification (NER) on CoNLL column files or CLUENER JSON lines, written with
the task API (`albert_tf.tasks.Task`); `run_ner.py` runs it.

The data side is `albert_tf.data.ner` (formats, windows of whole words, predictions
written back, seqeval's metrics); the model is `AlbertTokenClassifier`. A split's data
is its `ner.NerFile`; its records are the windows of its sentences
(`<cache_dir>/ner_<split>.tf_record`). The dev and test windows are kept with their
file's sentences to put the predictions back per word.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.data import cache, ner
from albert_tf.errors import UsageError
from albert_tf.evaluation.results import write_results
from albert_tf.export import LabelRule, ServingKind, serving_text
from albert_tf.modeling import common
from albert_tf.modeling.task_model import (
    HEAD_DROPOUT_RATE,
    AlbertTaskModel,
    check_count,
    check_rate,
    choice_outputs,
)
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_file, given_file, wanted_splits
from albert_tf.tasks.classification import CLASSIFIER_OUTPUTS
from albert_tf.tasks.options import option
from albert_tf.training.objectives import TokenObjective

# --data_dir + --task_name: the file names of each split.
TASK_FILES = {
    "cluener": {"train": "train.json", "dev": "dev.json", "test": "test.json"},
    "conll": {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"},
}
PREDICTION_FILES = {"conll": "test_predictions.conll", "cluener": "test_predictions.json"}


class AlbertTokenClassifier(AlbertTaskModel):
    """Token classification (NER), as Model Garden's tagging and Hugging Face's
    `AlbertForTokenClassification`: dropout, then a score per label at every position.

    Variables (ours: the original has no NER head; `tf1_variables.token_classification_variables`):
    `cls/ner/output_weights` [num_labels, H], `cls/ner/output_bias` [num_labels];
    logits = dropout(sequence_output) @ output_weights^T + output_bias, dropout
    (`dropout_rate`) only when training. Outputs (float32): `logits` [B, S, num_labels],
    `probabilities`, `predictions` (int32 [B, S]). Loss:
    `losses.token_classification_loss(logits, label_ids)` (label -1: not scored).
    """

    hf_architecture = names.HF_TOKEN_CLASSIFICATION
    heads = (task_heads.TOKEN_CLASSIFIER,)
    outputs_argument = "num_labels"
    reads_pooled_output = False

    def __init__(self, config: AlbertConfig, num_labels: int, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        check_count("num_labels", num_labels)
        dropout_rate = check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_token_classifier")
        super().__init__(config, seed, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self._build_head(self.heads[0], num_labels, dropout_rate)
        self.built = True

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        sequence = common.apply_dropout(self.dropout, sequence, training)
        logits = tf.einsum("BSH,NH->BSN", sequence,
                           tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits + tf.cast(self.output_bias, sequence.dtype), tf.float32)
        return choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels,
                "dropout_rate": self.dropout_rate}


TOKEN_CLASSIFIER = ServingKind(
    "token_classifier", AlbertTokenClassifier, CLASSIFIER_OUTPUTS,
    serving_text.word_specs, serving_text.pack_words,
    model_arguments=("num_labels",),
    labels=LabelRule("num_labels", lambda i: f"LABEL_{i}"),
    model_info=("num_labels",), text_info=("word_split",), label_output=names.TAGS)


@register
class TokenClassificationTask(Task):
    name = "ner"
    metric = "f1"
    serving_kinds = (TOKEN_CLASSIFIER,)

    @dataclasses.dataclass(frozen=True)
    class Options(Task.Options):
        """run_ner.py's defaults and words."""

        max_seq_length: int = option(
            128, "Window length; longer sentences are split into windows of whole words.")
        task_name: str | None = option(
            None, "cluener (train.json, dev.json, test.json: CLUENER2020 JSON lines) or "
            "conll (train.txt, dev.txt, test.txt: CoNLL column files).")
        data_dir: str | None = option(
            None, "Folder of the task's files (with --task_name; see --train_file).")
        train_file: str | None = option(
            None, "Training file: CoNLL columns (tag last) or CLUENER JSON lines "
            "(overrides --data_dir).")
        dev_file: str | None = option(None, "Dev file for --do_eval (same formats).")
        test_file: str | None = option(
            None, "File for --do_predict; predictions are written back in its own format "
            "(test_predictions.conll / test_predictions.json).")
        do_predict: bool = option(False, "Predict --test_file.")
        labels: tuple[str, ...] | None = option(
            None, "The tags, comma-separated (default: those of the training file, \"O\" "
            "first, saved as labels.txt in --output_dir).")
        dropout_prob: float = option(0.1, "Dropout of the tagging head.")
        word_split: str | None = option(
            None, "How raw text is cut into words as the data's were (the exports' "
            "serve_text, --transfer_file): derived from the first file read, the "
            "training file if any (`ner.word_split_of`).", choices=ner.WORD_SPLITS,
            flag=False)

    def read(self, split, paths) -> ner.NerFile:
        """The split's file (errors name file and line); training and dev files must have
        tags. The labels are known when dev and test are read: a sentence with another
        tag is skipped; their windows are made now."""
        data = ner.read_ner_file(paths[0], None if split == "train" else self.labels)
        if split != "test" and not data.has_tags:
            raise ner.NerDataError(f"{paths[0]}: the {split} file has no tags")
        ner.warn_about_unopened_entities(data)
        if split != "train":
            data.windows = self._windows(data)
        return data

    def _windows(self, data: ner.NerFile) -> list[ner.NerFeature]:
        return ner.file_features(data, self.tokenizer, self.options.max_seq_length,
                                 self.labels)

    class Data(Task.Data):
        """A sentence's words in windows of whole words, a record each, labelled at
        each word's first piece (the other positions padded with `ner.IGNORE`)."""

        data_sets = tuple(TASK_FILES)  # its data sets name their files' format
        label_features = ()  # (its labels are read per word, from the split's data)
        sequence_features = (names.LABEL_IDS,)
        padding_values = {names.LABEL_IDS: ner.IGNORE}  # padding positions: not scored

        def data_files(self) -> dict[str, list[str]]:
            """The file of each split asked for: --train_file etc., else
            --data_dir/<task's name>."""
            o = self.options
            task = (o.task_name or "").lower() or None
            task = None if task == self.task.name else task  # no data set named
            if task is not None and task not in TASK_FILES:
                raise UsageError(f"--task_name={o.task_name} is not one of "
                                 f"{', '.join(TASK_FILES)}")
            files = {}
            for split in wanted_splits(o):
                path = given_file(o, split)
                if path is None:
                    if not (o.data_dir and task):
                        raise UsageError(f"give --{split}_file, or --data_dir and "
                                         "--task_name")
                    path = os.path.join(o.data_dir, TASK_FILES[task][split])
                files[split] = [check_file(path, f"{split}_file")]
            return files

        def discover_labels(self, data: ner.NerFile) -> list[str]:
            return ner.labels_of([data])

        def derived_options(self, data) -> dict:
            """The word split of the first file read (the training file, if any)."""
            if self.options.word_split is not None or not data:
                return {}
            return {"word_split": ner.word_split_of(next(iter(data.values())))}

        def head(self, split, data: ner.NerFile, count: int) -> ner.NerFile:
            small = data.head(count)
            small.windows = self.task._windows(small)
            return small

        def split_records(self, split, data: ner.NerFile):
            windows = data.windows or self.task._windows(data)
            logging.info("%d windows of %d sentences of %s", len(windows),
                         len(data.sentences), data.path)
            for window in windows:
                yield {**{names.MODEL_TO_RECORD[k]: v for k, v in window.inputs.items()},
                       names.LABEL_IDS: window.label_ids}

        def record_spec(self) -> dict:
            return {names.LABEL_IDS: tf.io.FixedLenFeature(
                [self.options.max_seq_length], tf.int64)}

        def records_name(self, split: str) -> str:
            return f"ner_{split}"

        def cache_info(self, split, paths) -> dict:
            return {"format": 1, "split": split, "source": cache.abspath_or_url(paths[0]),
                    "source_sha256": cache.file_sha256(paths[0]),
                    "labels": list(self.task.labels),
                    "max_seq_length": int(self.options.max_seq_length),
                    **cache.tokenizer_settings(self.task.tokenizer)}

    class Teaching(Task.Teaching):
        soft_loss = "token_softmax"  # at each labelled position

        def transfer_is_pair(self) -> bool:
            return False

        def write_transfer_records(self, texts, path) -> int:
            """Each text cut into words as the training file's are (`ner.split_words`: a
            Chinese text into characters), every word tagged with the first label ("O")
            until `pseudo_label`; a long text in several windows, a record each."""
            task, sentences = self.task, []
            for line, (text, _) in enumerate(texts, 1):
                words = [w for w, _, _ in ner.split_words(text,
                                                          task.options.word_split or "whitespace")]
                sentences.append(ner.NerSentence(words, [task.labels[0]] * len(words),
                                                 line))
            return task.data.write_records("train", ner.NerFile(
                "--transfer_file", "conll", sentences), path)

        def pseudo_label(self, example, teacher_output) -> None:
            """At each position that predicts a word, the teacher's tag."""
            label = example.features.feature[names.LABEL_IDS].int64_list.value
            tags = np.argmax(np.asarray(teacher_output), -1)
            label[:] = [int(tags[i]) if old >= 0 else old for i, old in enumerate(label)]

    def build_model(self, config):
        return AlbertTokenClassifier(config, len(self.labels), seed=self.options.seed,
                                     dropout_rate=self.options.dropout_prob)

    def objective(self):
        return TokenObjective()

    def _tags(self, data: ner.NerFile, outputs) -> list[list[str]]:
        return ner.word_predictions(data, data.windows, outputs[names.PREDICTIONS],
                                    self.labels)

    def metrics(self, data: ner.NerFile, outputs) -> dict:
        """seqeval's entity-level scores of the dev predictions put back per word."""
        return ner.ner_metrics([s.tags for s in data.sentences],
                               self._tags(data, outputs))

    def write_predictions(self, data: ner.NerFile, outputs, output_dir, step) -> str:
        """The test file back with the predicted tags, in its own format; with tags in
        the file, also its scores to test_results.txt."""
        tags = self._tags(data, outputs)
        path = os.path.join(output_dir, PREDICTION_FILES[data.format])
        ner.write_predictions(data, tags, path)
        logging.info("wrote the predictions of %d sentences to %s", len(tags), path)
        if data.has_tags:
            scores = ner.ner_metrics([s.tags for s in data.sentences], tags)
            scores["global_step"] = step
            write_results(os.path.join(output_dir, "test_results.txt"), scores,
                          title="Test results")
        return path

    def export_options(self) -> dict:
        # serve_text cuts raw text into words as the data read here were cut.
        return {"word_split": self.options.word_split}
