"""SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original run_squad_v1.py /
run_squad_v2.py, written with the task API; `run_squad.py` runs it.

The splits are `train` (--train_file) and `test` (--predict_file, predicted and, where
it has answers, scored with the official EM / F1 into eval_results.txt and .json);
there is no dev split. Features are the original's (`albert_tf.data.squad`, cached at
--train_feature_file / --predict_feature_file); the models are `AlbertSquadV1` and
ALBERT's v2.0 beam head `AlbertSquadV2`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, losses, names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.data import cache, squad
from albert_tf.errors import UsageError
from albert_tf.evaluation import squad_metrics, squad_postprocess
from albert_tf.evaluation.results import write_results
from albert_tf.export import ServingKind, serving_text
from albert_tf.modeling import common
from albert_tf.modeling.base import ExtraInput
from albert_tf.modeling.task_model import (
    HEAD_DROPOUT_RATE,
    AlbertTaskModel,
    check_count,
    check_rate,
)
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_file
from albert_tf.tasks.options import FineTuningOptions, option
from albert_tf.training.objectives import MeanObjective

V1_OUTPUTS = (names.START_LOGITS, names.END_LOGITS)
V2_OUTPUTS = names.SQUAD_V2_OUTPUTS
# The split the predictions are made on, and its file flag.
SPLIT_FILES = {"train": "train_file", "test": "predict_file"}


class AlbertSquadV1(AlbertTaskModel):
    """SQuAD v1.1, as `squad_utils.create_v1_model`: a linear map of every position.

    Variables: `cls/squad/output_weights` [2, H], `cls/squad/output_bias` [2]; no head
    dropout. [start, end] = sequence_output @ output_weights^T + output_bias.
    Outputs (float32): `start_logits`, `end_logits` [B, S] — over every position, not
    masked (the original masks neither `p_mask` nor padding; its prediction step keeps
    only spans inside the paragraph). Loss: `losses.squad_v1_loss`.
    """

    hf_architecture = names.HF_QUESTION_ANSWERING
    heads = (task_heads.SQUAD_V1,)

    reads_pooled_output = False

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        kwargs.setdefault("name", "albert_squad_v1")
        super().__init__(config, seed, **kwargs)
        self._build_head(self.heads[0], 2)
        self.built = True

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        logits = tf.einsum("BSH,NH->BSN", sequence,
                           tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits + tf.cast(self.output_bias, sequence.dtype), tf.float32)
        return {names.START_LOGITS: logits[:, :, 0], names.END_LOGITS: logits[:, :, 1]}


# What the original SQuAD v2 head subtracts from the logits of positions p_mask excludes.
P_MASK_PENALTY = 1e30


def _apply_p_mask(logits, p_mask):
    """The original: logits * (1 - p_mask) - 1e30 * p_mask (1 = not an answer)."""
    return logits * (1.0 - p_mask) - P_MASK_PENALTY * p_mask


def _p_mask_warmup(mask: np.ndarray) -> np.ndarray:
    p_mask = (1 - mask).astype(np.float32)  # [1, L]: 1 past the end ...
    p_mask[0, 0] = 0  # ... and an answer possible at [CLS] (no answer)
    return p_mask


# SQuAD v2.0: 1 where no answer may be; padding positions never hold one.
P_MASK = ExtraInput(names.P_MASK, tf.float32, pad_value=1, per_position=True,
                    warmup=_p_mask_warmup)


class AlbertSquadV2(AlbertTaskModel):
    """SQuAD v2.0 with ALBERT's own head, as `squad_utils.create_v2_model`.

    Variables (root scope; initializer_range truncated normal, zero biases):
      `start_logits/dense` (H -> 1),
      `end_logits/dense_0` (2H -> H, tanh), `end_logits/LayerNorm`,
      `end_logits/dense_1` (H -> 1),
      `answer_class/dense_0` (2H -> H, tanh), `answer_class/dense_1` (H -> 1, no bias).

    Inputs: the encoder's dict plus `p_mask` [B, S] (1 where no answer may start or end:
    question, [SEP], padding), and in training `start_positions` [B] (or [B, 1]).
    Every logit is masked as the original: logits * (1 - p_mask) - 1e30 * p_mask.

    - start: log_softmax of the masked `start_logits/dense` of each position.
    - end for a start s: concat(sequence_output[i], sequence_output[s]) -> dense_0 (tanh)
      -> LayerNorm -> dense_1, masked, log_softmax over i.
    - answerability: concat(sum_i softmax(start)_i sequence_output[i], sequence_output[0])
      -> dense_0 (tanh) -> dropout (`dropout_rate`, only when training) -> dense_1.

    With `start_positions` in the inputs (the original's training graph), the end is
    conditioned on the gold start; outputs `start_log_probs` [B, S], `end_log_probs`
    [B, S] and `cls_logits` [B] for `losses.squad_v2_loss`. Without them (its predict
    graph), the beam search: the top `start_n_top` starts, for each the top `end_n_top`
    ends; outputs `start_top_log_probs`, `start_top_index` [B, start_n_top],
    `end_top_log_probs`, `end_top_index` [B, start_n_top * end_n_top] (entry
    i * end_n_top + j: end j of start i), `cls_logits` [B], and `start_log_probs`.
    Dropout follows `training` only, whichever path is taken. Outputs are float32.
    """

    heads = (task_heads.SQUAD_V2,)
    reads_pooled_output = False
    extra_inputs = (P_MASK,)

    def __init__(self, config: AlbertConfig, start_n_top: int = 5, end_n_top: int = 5,
                 seed: int | None = None, dropout_rate: float = HEAD_DROPOUT_RATE,
                 **kwargs):
        check_count("start_n_top", start_n_top)
        check_count("end_n_top", end_n_top)
        dropout_rate = check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_squad_v2")
        super().__init__(config, seed, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        # The head's layers, as its parts (`task_heads.SQUAD_V2`) say.
        layers = self.head_layers(self.heads[0], 1, dropout_rate)
        self.start_dense = layers["start_logits/dense"]
        self.end_dense_0 = layers["end_logits/dense_0"]
        self.end_layer_norm = layers["end_logits/LayerNorm"]
        self.end_dense_1 = layers["end_logits/dense_1"]
        self.answer_dense_0 = layers["answer_class/dense_0"]
        self.answer_dropout = layers["answer_class/dropout"]
        self.answer_dense_1 = layers["answer_class/dense_1"]
        layers.build()
        self.built = True

    def _end_logits(self, sequence, start_features):
        """End logits [B, K, S] (float32, unmasked) for K start representations
        `start_features` [B, K, H]: dense_1(LayerNorm(dense_0([seq_i ; start_k])))."""
        length, k = tf.shape(sequence)[1], tf.shape(start_features)[1]
        # (expand_dims, not [:, None]: LiteRT has no StridedSlice that adds axes)
        pairs = tf.concat([tf.tile(tf.expand_dims(sequence, 2), [1, 1, k, 1]),
                           tf.tile(tf.expand_dims(start_features, 1), [1, length, 1, 1])],
                          axis=-1)  # [B, S, K, 2H]
        x = self.end_dense_1(self.end_layer_norm(self.end_dense_0(pairs)))  # [B, S, K, 1]
        return tf.cast(tf.transpose(x[..., 0], [0, 2, 1]), tf.float32)

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "p_mask" not in inputs:
            keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise KeyError("AlbertSquadV2 needs the input 'p_mask' [B, S] (1 where no "
                           f"answer may be: question, [SEP], padding); got {keys}")
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        p_mask = tf.cast(inputs["p_mask"], tf.float32)  # [B, S]
        start_logits = tf.cast(self.start_dense(sequence)[..., 0], tf.float32)
        start_masked = _apply_p_mask(start_logits, p_mask)
        start_log_probs = tf.nn.log_softmax(start_masked, axis=-1)
        outputs = {"start_log_probs": start_log_probs}

        if inputs.get("start_positions") is not None:
            positions = tf.reshape(tf.cast(inputs["start_positions"], tf.int32), [-1, 1])
            start_features = tf.gather(sequence, positions, batch_dims=1)  # [B, 1, H]
            end_logits = self._end_logits(sequence, start_features)[:, 0]  # [B, S]
            outputs["end_log_probs"] = tf.nn.log_softmax(
                _apply_p_mask(end_logits, p_mask), axis=-1)
        else:
            length = sequence.shape[1]
            if length is not None and length < max(self.start_n_top, self.end_n_top):
                raise ValueError(
                    f"sequence length {length} is shorter than start_n_top "
                    f"({self.start_n_top}) or end_n_top ({self.end_n_top})")
            start_top_log_probs, start_top_index = tf.nn.top_k(
                start_log_probs, k=self.start_n_top)  # [B, K]
            start_features = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, K, H]
            end_logits = self._end_logits(sequence, start_features)  # [B, K, S]
            end_log_probs = tf.nn.log_softmax(
                _apply_p_mask(end_logits, tf.expand_dims(p_mask, 1)), axis=-1)
            end_top_log_probs, end_top_index = tf.nn.top_k(end_log_probs, k=self.end_n_top)
            beams = self.start_n_top * self.end_n_top
            outputs.update({
                "start_top_log_probs": start_top_log_probs,
                "start_top_index": start_top_index,
                "end_top_log_probs": tf.reshape(end_top_log_probs, [-1, beams]),
                "end_top_index": tf.reshape(end_top_index, [-1, beams]),
            })

        # Answerability from the start-weighted representation and [CLS]; it does not
        # depend on the end, so there is one cls_logits per example.
        start_p = tf.cast(tf.nn.softmax(start_masked, axis=-1), sequence.dtype)
        # [B, 1, S] @ [B, S, H] (an einsum here has no LiteRT kernel)
        start_feature = tf.squeeze(tf.matmul(tf.expand_dims(start_p, 1), sequence), 1)
        x = self.answer_dense_0(tf.concat([start_feature, sequence[:, 0]], axis=-1))
        x = common.apply_dropout(self.answer_dropout, x, training)
        outputs["cls_logits"] = tf.cast(self.answer_dense_1(x)[:, 0], tf.float32)
        return outputs

    def get_config(self):
        return {**super().get_config(), "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "dropout_rate": self.dropout_rate}


SQUAD_V1 = ServingKind(
    "squad_v1", AlbertSquadV1, (names.START_LOGITS, names.END_LOGITS),
    serving_text.squad_specs, serving_text.pack_squad,
    text_info=("max_query_length",), text_offsets=True)
SQUAD_V2 = ServingKind(
    "squad_v2", AlbertSquadV2, names.SQUAD_V2_OUTPUTS,
    serving_text.squad_specs, serving_text.pack_squad,
    model_info=("start_n_top", "end_n_top"), text_info=("max_query_length",),
    text_offsets=True,
    # The beam takes the top start_n_top / end_n_top positions.
    min_length=lambda model: max(model.start_n_top, model.end_n_top))


@register
class SquadTask(Task):
    name = "squad"
    metric = "f1"  # of the predictions (the official script's), with no dev split
    serving_kinds = (SQUAD_V1, SQUAD_V2)

    @dataclasses.dataclass(frozen=True)
    class Options(FineTuningOptions):
        """The original run_squad_v1.py / run_squad_v2.py's flags and defaults."""

        max_seq_length: int = option(384)
        do_predict: bool = option(False, "Predict --predict_file.")
        train_file: str | None = option(None, "SQuAD JSON for training.")
        predict_file: str | None = option(None, "SQuAD JSON to predict (and score).")
        train_feature_file: str | None = option(
            None, "Cached training features (default: train.tf_record in --cached_dir, "
            "else in --output_dir).")
        predict_feature_file: str | None = option(
            None, "Cached prediction features (default: predict.tf_record in "
            "--cached_dir, else in --output_dir).")
        version_2_with_negative: bool = option(False, "SQuAD v2.0: unanswerable questions.")
        doc_stride: int = option(128, "Stride between paragraph windows.")
        max_query_length: int = option(64, "Maximum question length in tokens.")
        n_best_size: int = option(20, "Candidates per question in nbest_predictions.")
        max_answer_length: int = option(30, "Longest answer, in tokens.")
        start_n_top: int = option(5, "v2.0: start positions of the beam.")
        end_n_top: int = option(5, "v2.0: end positions per start.")
        null_score_diff_threshold: float = option(
            0.0, "v2.0: predict no answer when the null score exceeds the best span by "
            "more than this.")

        def validate(self) -> None:
            if not (self.do_train or self.do_predict):
                raise UsageError("nothing to do: give --do_train and/or --do_predict")
            if self.do_predict and not self.do_train and \
                    not tf.train.latest_checkpoint(self.output_dir or ""):
                raise UsageError(
                    f"--do_predict without --do_train needs a trained model in "
                    f"--output_dir={self.output_dir}, and there is none")
            check_file(self.spm_model_file, "spm_model_file")
            squad.validate_settings(self.max_seq_length, self.doc_stride,
                                    self.max_query_length)

    def __init__(self, options, tokenizer=None):
        super().__init__(options, tokenizer)
        self.version_2 = self.options.version_2_with_negative
        self.serving_kind = self.serving_kinds[1 if self.version_2 else 0]

    def read(self, split, paths):
        """The questions of the split's file (the training answers with --do_train)."""
        return squad.read_squad_examples(paths[0], is_training=split == "train")

    class Data(Task.Data):
        """The original's features: a question's paragraph in windows of --doc_stride,
        the training features shuffled as the original's, cached in its files."""

        label_features = (names.UNIQUE_IDS,)

        @property
        def eval_outputs(self) -> tuple[str, ...]:
            return V2_OUTPUTS if self.task.version_2 else V1_OUTPUTS

        def data_files(self) -> dict[str, list[str]]:
            o = self.options
            wanted = {"train": (o.do_train, o.train_file),
                      "test": (o.do_predict, o.predict_file)}
            return {split: [check_file(path, SPLIT_FILES[split])]
                    for split, (on, path) in wanted.items() if on}

        def cached_records(self, split, data, paths, cache_dir):
            """The training features (in the original's shuffled order) or the
            prediction features (with what post-processing needs: the records' `data`,
            which `write_predictions` gets), converted once and cached."""
            o = self.options
            training = split == "train"
            given = o.train_feature_file if training else o.predict_feature_file
            features = squad.load_or_build_features(
                paths[0], self.task.tokenizer,
                given or os.path.join(cache_dir, "train.tf_record" if training
                                      else "predict.tf_record"),
                is_training=training, keep_features=None if training else True,
                shuffle_seed=squad.ORIGINAL_TRAIN_SHUFFLE_SEED if training else None,
                max_seq_length=o.max_seq_length, doc_stride=o.doc_stride,
                max_query_length=o.max_query_length, examples=data)
            return cache.CachedRecords(features.record_file, len(features.examples), 0,
                                       not features.rebuilt,
                                       data=None if training else features)

        def train_steps(self, num_examples: int | None) -> tuple[int, int]:
            """--train_step and --warmup_step where given (run_classifier.py has them);
            else the original's: steps = examples / batch * epochs (rounded down),
            warmup a proportion of them (one step where nothing is trained)."""
            o = self.options
            steps = o.train_step
            if steps is None:
                steps = 1 if num_examples is None else max(
                    1, int(num_examples / o.train_batch_size * o.num_train_epochs))
            warmup = o.warmup_step
            return steps, int(steps * o.warmup_proportion) if warmup is None else warmup

        def dataset(self, path, batch_size, training, drop_remainder=False):
            return squad.squad_dataset(path, self.options.max_seq_length, batch_size,
                                       is_training=training, training=training,
                                       seed=self.options.seed if training else None,
                                       drop_remainder=drop_remainder)

    def build_model(self, config):
        """The v1.1 span head, or with --version_2_with_negative ALBERT's v2.0 beam
        head."""
        o = self.options
        if self.version_2:
            return AlbertSquadV2(config, start_n_top=o.start_n_top,
                                 end_n_top=o.end_n_top, seed=o.seed)
        return AlbertSquadV1(config, seed=o.seed)

    def objective(self):
        if self.version_2:
            return MeanObjective(lambda o, f: losses.squad_v2_loss(
                o["start_log_probs"], o["end_log_probs"], o["cls_logits"],
                f[names.START_POSITIONS], f[names.END_POSITIONS], f[names.IS_IMPOSSIBLE],
                per_example=True))
        return MeanObjective(lambda o, f: losses.squad_v1_loss(
            o[names.START_LOGITS], o[names.END_LOGITS], f[names.START_POSITIONS],
            f[names.END_POSITIONS], per_example=True))

    def write_predictions(self, evaluation: squad.SquadFeatureFile, outputs, output_dir,
                          step) -> dict | None:
        """predictions.json, nbest_predictions.json (and null_odds.json) of the
        prediction file's examples and features (the records' `data`); where the file
        has answers, the official scores to eval_results.txt and eval_results.json, and
        returned (the run's results: SQuAD has no dev split)."""
        o = self.options
        results = {int(uid): {k: outputs[k][i] for k in self.data.eval_outputs}
                   for i, uid in enumerate(outputs[names.UNIQUE_IDS])}
        options = dict(n_best_size=o.n_best_size, max_answer_length=o.max_answer_length)
        if self.version_2:
            answers = squad_postprocess.write_predictions_v2(
                evaluation.examples, evaluation.features, results, output_dir,
                null_score_diff_threshold=o.null_score_diff_threshold, **options)
        else:
            answers = squad_postprocess.write_predictions_v1(
                evaluation.examples, evaluation.features, results, output_dir, **options)
        logging.info("predictions: %s", os.path.join(output_dir, "predictions.json"))
        gold = squad_metrics.gold_answers(evaluation.examples)
        if not any(gold.values()):  # a file without answers: nothing to score
            return None
        if self.version_2:
            scores = squad_metrics.evaluate_v2(gold, answers.predictions, answers.null_odds)
        else:
            scores = squad_metrics.evaluate_v1(gold, answers.predictions)
        scores = {k: v for k, v in scores.items()
                  if not (isinstance(v, float) and math.isnan(v))}
        scores["global_step"] = step
        write_results(os.path.join(output_dir, "eval_results.txt"), scores,
                      summary_step=step)
        fileio.write_text_atomically(os.path.join(output_dir, "eval_results.json"),
                                     json.dumps(scores, indent=2))
        return scores

    def export_options(self) -> dict:
        return {"max_query_length": self.options.max_query_length}
