"""Multiple choice, written with the task API: RACE as the original `run_race.py`, and
C3, SWAG and JSON lines (`albert_tf.data.multiple_choice`).

Each example's choices are packed `[CLS] context [SEP] question + choice [SEP]`
(`albert_tf.data.race`), scored by `AlbertMultipleChoice`; a question with fewer choices
than the task's most has absent ones, never predicted. `--do_predict` writes
`test_results.tsv` and, but for RACE, `<task>_predictions.jsonl`.

`--long_text=windows` (not RACE, whose records are the original's) reads a context
longer than what `--max_seq_length` leaves beside the question's choices whole, in
windows (`albert_tf.data.choice_records.convert_example_windows`): each window, with
all the question's choices, trains as an example of its answer, and a question's
answer at evaluation, prediction and in the export's `serve_text` is pooled over its
windows: each choice's logit the mean of its windows', the probabilities the softmax
of those (`WINDOW_POOLING`).
"""

from __future__ import annotations

import dataclasses
import os
import string

import numpy as np
import tensorflow as tf

from albert_tf import losses, names, packing, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.data import choice_records, multiple_choice, race, sentence_records
from albert_tf.errors import UsageError
from albert_tf.export import LabelRule, ServingKind, serving_text
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.task_model import (
    HEAD_DROPOUT_RATE,
    AlbertTaskModel,
    check_count,
    check_rate,
    choice_outputs,
)
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_file, check_long_text, given_file, wanted_splits
from albert_tf.tasks.classification import (
    CLASSIFICATION_POOLING,
    CLASSIFIER_OUTPUTS,
    prediction_file,
    write_test_results,
)
from albert_tf.tasks.options import LongTextOptions, option
from albert_tf.training.objectives import MeanObjective

RACE = "race"
CHOICE_TASKS = ("c3", "swag", "multiple_choice")  # besides RACE


def with_max_qa_length(options):
    """`max_qa_length` left unset: RACE's default cut to what `max_seq_length` leaves
    (a default fits the flags given, as the export's does)."""
    if options.max_qa_length is not None:
        return options
    return options.replace(max_qa_length=min(
        choice_records.DEFAULT_MAX_QA_LENGTH, packing.segment_budget(options.max_seq_length)))


# The logit of an absent choice (all-zero input_mask): finite, so that a row with no
# choice at all still has a softmax, and far below any score.
ABSENT_CHOICE_LOGIT = -1e9


class AlbertMultipleChoice(AlbertTaskModel):
    """RACE, as `race_utils.create_model`: every choice is scored from its pooled output.

    Inputs: the encoder's names, each int [B, num_choices, S]; they are run as
    [B * num_choices, S]. Variables (root scope): `output_weights` [1, H],
    `output_bias` [1]; score = dropout(pooled) @ output_weights^T + output_bias (dropout
    `dropout_rate`, the original's `--dropout_prob` 0.1, only when training).
    A choice whose `input_mask` is all zeros is absent (an example with fewer choices
    than `num_choices`, padded): its logit is `ABSENT_CHOICE_LOGIT`, so its probability
    is 0 and it is never predicted (RACE, whose four choices are always there, is
    unchanged).
    Outputs (float32): `logits` [B, num_choices], `probabilities`, `predictions` (int32
    [B]). Loss: `losses.classification_loss(logits, label_ids)`.
    """

    hf_architecture = names.HF_MULTIPLE_CHOICE
    heads = (task_heads.MULTIPLE_CHOICE,)
    detectable = False  # its head is the classifier's
    per_choice = True

    def __init__(self, config: AlbertConfig, num_choices: int = 4, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        check_count("num_choices", num_choices)
        dropout_rate = check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_multiple_choice")
        super().__init__(config, seed, **kwargs)
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self._build_head(self.heads[0], 1, dropout_rate)
        self.built = True

    def _flatten(self, inputs) -> tuple[dict, tf.Tensor]:
        """The inputs as [B * C, S], and [B, C]."""
        if not isinstance(inputs, dict) or names.INPUT_WORD_IDS not in inputs:
            raise KeyError(f"AlbertMultipleChoice takes a dict with '{names.INPUT_WORD_IDS}' "
                           f"[B, num_choices, S] (and '{names.INPUT_MASK}', "
                           f"'{names.INPUT_TYPE_IDS}')")
        flat, batch_and_choices = {}, None
        for name in INPUT_NAMES:
            if inputs.get(name) is None:
                continue
            value = tf.convert_to_tensor(inputs[name])
            if value.shape.rank != 3:
                raise ValueError(
                    f"AlbertMultipleChoice needs '{name}' of rank 3 [batch, num_choices, "
                    f"seq_length]; got shape {value.shape}")
            choices = value.shape[1]
            if choices is not None and choices != self.num_choices:
                raise ValueError(
                    f"'{name}' has {choices} choices (shape {value.shape}); this model "
                    f"was built for num_choices={self.num_choices}")
            if name == names.INPUT_WORD_IDS:
                batch_and_choices = tf.shape(value)[:2]
            flat[name] = tf.reshape(value, [-1, tf.shape(value)[2]])
        return flat, batch_and_choices

    def call(self, inputs, training=None):
        flat, batch_and_choices = self._flatten(inputs)
        pooled = self._encode(flat, training, first_token_only=True)[names.POOLED_OUTPUT]
        scores = self._score_pooled(pooled, training)  # [B * C, 1]
        logits = tf.cast(tf.reshape(scores, batch_and_choices), tf.float32)  # [B, C]
        if names.INPUT_MASK in flat:
            present = tf.reshape(tf.reduce_any(flat[names.INPUT_MASK] > 0, axis=-1),
                                 batch_and_choices)
            logits = tf.where(present, logits, ABSENT_CHOICE_LOGIT)
        return choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices,
                "dropout_rate": self.dropout_rate}


# How a question's answer comes from its windows' (`--long_text=windows`), at evaluation
# and prediction and in the export's `serve_text`: each choice's logit the mean of its
# windows' (an absent choice's stays `ABSENT_CHOICE_LOGIT`), the probabilities and
# choice of those as the model makes them of its logits: the classifier's rule.
WINDOW_POOLING = CLASSIFICATION_POOLING


def _choice_letter(i: int) -> str:
    return string.ascii_uppercase[i] if i < 26 else str(i)


MULTIPLE_CHOICE = ServingKind(
    "multiple_choice", AlbertMultipleChoice, CLASSIFIER_OUTPUTS,
    serving_text.choice_specs, serving_text.pack_choices,
    model_arguments=("num_choices",),
    labels=LabelRule("num_choices", _choice_letter),
    model_info=("num_choices",), text_info=("max_qa_length",),
    window_pooling=lambda model: WINDOW_POOLING)


@register
class MultipleChoiceTask(Task):
    name = "multiple_choice"
    metric = "eval_accuracy"
    serving_kinds = (MULTIPLE_CHOICE,)

    @dataclasses.dataclass(frozen=True)
    class Options(LongTextOptions, Task.Options):
        max_qa_length: int | None = option(
            None, "Multiple choice: maximum question + option length (default: RACE's "
            f"{choice_records.DEFAULT_MAX_QA_LENGTH}, or what --max_seq_length leaves "
            "after [CLS] and 2 x [SEP]).")
        high_only: bool = option(False, "RACE: only the high-school part.")
        middle_only: bool = option(False, "RACE: only the middle-school part.")
        num_choices: int | None = option(
            None, "The choices per question, derived from the data: RACE's 4; else the "
            "most of any question read, transfer questions included (at least 4 for "
            "C3 and SWAG).", minimum=2, flag=False)
        # run_classifier.py's, as GLUE's (`ClassificationTask.Options`)
        train_step: int | None = option(1000)
        warmup_step: int | None = option(0)
        exclusive = (("high_only", "middle_only"),)

        def validate(self) -> None:
            if (self.task_name or "").lower() == RACE and (
                    not self.data_dir or not os.path.isdir(self.data_dir)):
                raise UsageError(f"--data_dir={self.data_dir} is not a directory")
            if (self.task_name or "").lower() == RACE and \
                    self.long_text == packing.WINDOWS:
                raise UsageError("--long_text=windows: RACE's records are the original's "
                                 "and cut its articles; for windows give its questions as "
                                 "--task_name=multiple_choice JSON lines")
            super().validate()
            max_qa_length = with_max_qa_length(self).max_qa_length
            if not 1 <= max_qa_length <= self.max_seq_length - 3:
                raise UsageError(
                    f"--max_qa_length={max_qa_length} must be positive and leave room "
                    f"for [CLS] and 2 x [SEP] in --max_seq_length={self.max_seq_length}")
            check_long_text(self, True, max_qa_length)

    def __init__(self, options, tokenizer=None):
        super().__init__(options, tokenizer)
        self.options = with_max_qa_length(self.options)
        self.name = self.options.task_name.lower()
        self.is_race = self.name == RACE

    @property
    def num_choices(self) -> int:
        """RACE's 4; else the run's (`Data.derived_options`)."""
        if self.is_race:
            return race.NUM_CHOICES
        if self.options.num_choices is None:
            raise ValueError("MultipleChoiceTask: options.num_choices is derived from "
                             "the data (Data.derived_options) before the task is made")
        return self.options.num_choices

    # -------------------------------------------------------------------- data
    def read(self, split, paths):
        if self.is_race:
            o = self.options
            return race.RaceProcessor.for_tokenizer(
                self.tokenizer, o.high_only, o.middle_only).get_examples(
                    o.data_dir, split)
        labelled = split != "test" or None  # training and dev questions need answers
        return self._read_files(paths, labelled)

    def _read_files(self, paths, labelled):
        process = self.tokenizer.preprocess
        if self.name == "c3":
            return multiple_choice.read_c3(paths, process, labelled=labelled)
        read = multiple_choice.read_swag if self.name == "swag" else \
            multiple_choice.read_choice_jsonl
        return [e for path in paths for e in read(path, process, labelled=labelled)]

    class Data(Task.Data):
        """RACE's records are the original's (their own cache); the others' one per
        question, its choices padded to `num_choices`."""

        data_sets = (RACE, *CHOICE_TASKS)

        @property
        def label_features(self) -> tuple[str, ...]:
            return self.with_windows((names.LABEL_IDS,))

        @property
        def eval_outputs(self) -> tuple[str, ...]:
            # with windows, pooled, then the choice (`example_outputs`)
            return (names.LOGITS,) if self.long_text.windows else (names.PREDICTIONS,)

        @property
        def predict_outputs(self) -> tuple[str, ...]:
            return (names.LOGITS,) if self.long_text.windows else \
                (names.PROBABILITIES, names.PREDICTIONS)

        def example_outputs(self, outputs):
            """With windows, a question's answer from its windows' (`WINDOW_POOLING`):
            the mean of each choice's logits, its probabilities the softmax of those."""
            if not self.long_text.windows:
                return outputs
            return sentence_records.pool_windows(outputs, WINDOW_POOLING)

        def data_files(self) -> dict[str, list[str]]:
            """--<split>_file, else the task's names under --data_dir (RACE's folders
            are found as its records are made)."""
            o, task = self.options, self.task
            files = {}
            for split in wanted_splits(o):
                given = given_file(o, split)
                if task.is_race:
                    paths = []
                elif given:
                    paths = [p for p in given.split(",") if p]
                elif not o.data_dir:
                    raise UsageError(f"give --{split}_file or --data_dir for {task.name}")
                elif task.name == "c3":
                    paths = multiple_choice.c3_files(o.data_dir, split)
                else:
                    names_of = multiple_choice.SWAG_FILES if task.name == "swag" else \
                        multiple_choice.JSONL_FILES
                    paths = [os.path.join(o.data_dir, names_of[split])]
                files[split] = [check_file(path, f"{split}_file") for path in paths]
            return files

        def derived_options(self, data) -> dict:
            """The choices per question: the most of any question of the splits and of
            --transfer_file (at least 4 for C3 and SWAG); RACE's are 4."""
            o, task = self.options, self.task
            if task.is_race or o.num_choices is not None:
                return {}
            counts = [len(e.endings) for examples in data.values() for e in examples]
            if o.transfer_file and tf.io.gfile.exists(o.transfer_file):
                counts += [len(e.endings) for e in
                           task.teaching.read_transfer(o.transfer_file) or ()]
            most = max(counts, default=choice_records.DEFAULT_NUM_CHOICES)
            if task.name in ("c3", "swag"):
                most = max(most, choice_records.DEFAULT_NUM_CHOICES)
            return {"num_choices": most}

        def cached_records(self, split, examples, paths, cache_dir):
            o, task = self.options, self.task
            if not task.is_race:
                return super().cached_records(split, examples, paths, cache_dir)
            return race.cached_race_records(
                split, o.data_dir, cache_dir, task.tokenizer, o.max_seq_length,
                o.max_qa_length, high_only=o.high_only, middle_only=o.middle_only,
                examples=examples)

        def cache_settings(self) -> dict:
            return {"max_qa_length": int(self.options.max_qa_length),
                    "num_choices": self.task.num_choices}

        def write_records(self, split, examples, path) -> int:
            o = self.options
            return choice_records.write_examples(examples, o.max_seq_length,
                                                 o.max_qa_length, self.task.tokenizer,
                                                 path, self.task.num_choices,
                                                 self.long_text.at(split))

        def dataset(self, path, batch_size, training, drop_remainder=False,
                    extra_spec=None):
            return choice_records.choice_dataset(
                path, self.options.max_seq_length, batch_size, training=training,
                seed=self.options.seed, drop_remainder=drop_remainder,
                num_choices=self.task.num_choices, windows=self.long_text.windows,
                extra_spec=extra_spec)

    class Teaching(Task.Teaching):
        soft_loss = "softmax"  # over the choices

        def read_transfer(self, path):
            """--transfer_file: questions in the task's own format (C3's JSON, SWAG's
            CSV, JSON lines), their answers not needed (the teacher's are learned);
            RACE's directories take none (None: refused as a task without transfer
            text)."""
            task = self.task
            if task.is_race:
                return None
            return task._read_files([path], None)

        def write_transfer_records(self, examples, path) -> int:
            return self.task.data.write_records("train", examples, path)

        def pseudo_label(self, example, teacher_output) -> None:
            """The teacher's choice (a padded choice's logit is -1e9: never chosen)."""
            example.features.feature[names.LABEL_IDS].int64_list.value[:] = [
                int(np.argmax(teacher_output))]

    # ------------------------------------------------------------------- model
    def build_model(self, config):
        return AlbertMultipleChoice(config, num_choices=self.num_choices,
                                    seed=self.options.seed,
                                    dropout_rate=self.options.dropout_prob)

    def objective(self):
        return MeanObjective(lambda o, f: losses.classification_loss(
            o[names.LOGITS], f[names.LABEL_IDS], per_example=True))

    # ----------------------------------------------------------------- results
    def metrics(self, examples, outputs) -> dict:
        return {"eval_accuracy": float(np.mean(
            outputs[names.PREDICTIONS] == outputs[names.LABEL_IDS]))}

    def write_predictions(self, examples, outputs, output_dir, step) -> str:
        """test_results.tsv; but for RACE, `<task>_predictions.jsonl`: `id`,
        `prediction` (a choice's index), `probabilities` (of the example's own
        choices), `label` (the gold one, or null)."""
        written = write_test_results(outputs[names.PROBABILITIES], output_dir)
        if self.is_race:
            return written
        rows = []
        for i, example in enumerate(examples):
            count = len(example.endings)
            label = None if example.label == multiple_choice.NO_LABEL else example.label
            rows.append({"id": example.example_id,
                         "prediction": int(outputs[names.PREDICTIONS][i]),
                         "probabilities": [round(float(p), 6)
                                           for p in outputs[names.PROBABILITIES][i][:count]],
                         "label": label})
        return prediction_file(self.name, output_dir, rows)

    def export_options(self) -> dict:
        """`max_qa_length`, and with `--long_text=windows` the windows that
        `serve_text` reads too."""
        return {"max_qa_length": self.options.max_qa_length,
                **self.data.long_text.export_options()}
