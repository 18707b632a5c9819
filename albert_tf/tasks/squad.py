"""SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original run_squad_v1.py /
run_squad_v2.py, written with the task API; `run_squad.py` runs it.

The splits are `train` (--train_file) and `test` (--predict_file, predicted and, where
it has answers, scored with the official EM / F1 into eval_results.txt and .json);
there is no dev split. Features are the original's (`albert_tf.data.squad`, cached at
--train_feature_file / --predict_feature_file); the models are `AlbertSquadV1` and
ALBERT's v2.0 beam head `AlbertSquadV2`.
"""

from __future__ import annotations

import json
import math
import os

import tensorflow as tf
from absl import flags

from albert_tf import fileio, losses, names
from albert_tf.data import cache, squad
from albert_tf.errors import UsageError
from albert_tf.evaluation import squad_metrics, squad_postprocess
from albert_tf.evaluation.results import write_results
from albert_tf.export.kinds import SERVING_KINDS
from albert_tf.modeling import AlbertSquadV1, AlbertSquadV2
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_file
from albert_tf.training.objectives import MeanObjective

V1_OUTPUTS = (names.START_LOGITS, names.END_LOGITS)
V2_OUTPUTS = names.SQUAD_V2_OUTPUTS
# The split the predictions are made on, and its file flag.
SPLIT_FILES = {"train": "train_file", "test": "predict_file"}


@register
class SquadTask(Task):
    name = "squad"
    metric = "f1"  # of the predictions (the official script's), with no dev split
    serving_kinds = (SERVING_KINDS["squad_v1"], SERVING_KINDS["squad_v2"])
    label_features = (names.UNIQUE_IDS,)

    @classmethod
    def define_flags(cls) -> None:
        flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
        flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and score).")
        flags.DEFINE_string("train_feature_file", None, "Cached training features "
                            "(default: output_dir/train.tf_record).")
        flags.DEFINE_string("predict_feature_file", None,
                            "Cached prediction features (default: "
                            "output_dir/predict.tf_record).")
        flags.DEFINE_bool("version_2_with_negative", False,
                          "SQuAD v2.0: unanswerable questions.")
        flags.DEFINE_integer("doc_stride", 128, "Stride between paragraph windows.")
        flags.DEFINE_integer("max_query_length", 64, "Maximum question length in tokens.")
        flags.DEFINE_integer("n_best_size", 20,
                             "Candidates per question in nbest_predictions.")
        flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
        flags.DEFINE_integer("start_n_top", 5, "v2.0: start positions of the beam.")
        flags.DEFINE_integer("end_n_top", 5, "v2.0: end positions per start.")
        flags.DEFINE_float("null_score_diff_threshold", 0.0,
                           "v2.0: predict no answer when the null score exceeds the best "
                           "span by more than this.")

    def __init__(self, options):
        super().__init__(options)
        self.version_2 = options["version_2_with_negative"]
        self.serving_kind = self.serving_kinds[1 if self.version_2 else 0]
        self.eval_outputs = V2_OUTPUTS if self.version_2 else V1_OUTPUTS
        self.features: dict[str, squad.SquadFeatureFile] = {}

    def validate(self) -> None:
        o = self.options
        if not (o["do_train"] or o["do_predict"]):
            raise UsageError("nothing to do: give --do_train and/or --do_predict")
        if o["do_predict"] and not o["do_train"] and \
                not tf.train.latest_checkpoint(o["output_dir"] or ""):
            raise UsageError(
                f"--do_predict without --do_train needs a trained model in "
                f"--output_dir={o['output_dir']}, and there is none")
        check_file(o["spm_model_file"], "spm_model_file")
        squad.validate_settings(o["max_seq_length"], o["doc_stride"], o["max_query_length"])

    def data_files(self) -> dict[str, list[str]]:
        wanted = {"train": self.options["do_train"], "test": self.options["do_predict"]}
        return {split: [check_file(self.options[flag], flag)]
                for split, flag in SPLIT_FILES.items() if wanted[split]}

    def read(self, split, paths):
        """The questions of the split's file (the training answers with --do_train)."""
        return squad.read_squad_examples(paths[0], is_training=split == "train")

    def cached_records(self, split, data, paths, cache_dir):
        """The training features (in the original's shuffled order) or the prediction
        features (with what post-processing needs), converted once and cached."""
        o = self.options
        training = split == "train"
        given = o["train_feature_file" if training else "predict_feature_file"]
        features = squad.load_or_build_features(
            paths[0], self.tokenizer,
            given or os.path.join(o["output_dir"], "train.tf_record" if training
                                  else "predict.tf_record"),
            is_training=training, keep_features=None if training else True,
            shuffle_seed=squad.ORIGINAL_TRAIN_SHUFFLE_SEED if training else None,
            max_seq_length=o["max_seq_length"], doc_stride=o["doc_stride"],
            max_query_length=o["max_query_length"], examples=data)
        self.features[split] = features
        return cache.CachedRecords(features.record_file, len(features.examples), 0,
                                   not features.rebuilt)

    def train_steps(self, num_examples: int | None) -> tuple[int, int]:
        """The original: steps = examples / batch * epochs (rounded down), warmup a
        proportion of them (one step where nothing is trained)."""
        o = self.options
        steps = 1 if num_examples is None else max(
            1, int(num_examples / o["train_batch_size"] * o["num_train_epochs"]))
        return steps, int(steps * o["warmup_proportion"])

    def dataset(self, path, batch_size, training, drop_remainder=False):
        return squad.squad_dataset(path, self.options["max_seq_length"], batch_size,
                                   is_training=training, training=training,
                                   seed=self.options["seed"] if training else None,
                                   drop_remainder=drop_remainder)

    def build_model(self, config):
        """The v1.1 span head, or with --version_2_with_negative ALBERT's v2.0 beam
        head."""
        o = self.options
        if self.version_2:
            return AlbertSquadV2(config, start_n_top=o["start_n_top"],
                                 end_n_top=o["end_n_top"], seed=o["seed"])
        return AlbertSquadV1(config, seed=o["seed"])

    def objective(self):
        if self.version_2:
            return MeanObjective(lambda o, f: losses.squad_v2_loss(
                o["start_log_probs"], o["end_log_probs"], o["cls_logits"],
                f[names.START_POSITIONS], f[names.END_POSITIONS], f[names.IS_IMPOSSIBLE],
                per_example=True))
        return MeanObjective(lambda o, f: losses.squad_v1_loss(
            o[names.START_LOGITS], o[names.END_LOGITS], f[names.START_POSITIONS],
            f[names.END_POSITIONS], per_example=True))

    def write_predictions(self, data, outputs, output_dir, step) -> str:
        """predictions.json, nbest_predictions.json (and null_odds.json); where the file
        has answers, the official scores to eval_results.txt and eval_results.json."""
        o = self.options
        evaluation = self.features["test"]
        results = {int(uid): {k: outputs[k][i] for k in self.eval_outputs}
                   for i, uid in enumerate(outputs[names.UNIQUE_IDS])}
        options = dict(n_best_size=o["n_best_size"], max_answer_length=o["max_answer_length"])
        if self.version_2:
            answers = squad_postprocess.write_predictions_v2(
                evaluation.examples, evaluation.features, results, output_dir,
                null_score_diff_threshold=o["null_score_diff_threshold"], **options)
        else:
            answers = squad_postprocess.write_predictions_v1(
                evaluation.examples, evaluation.features, results, output_dir, **options)
        written = os.path.join(output_dir, "predictions.json")
        gold = squad_metrics.gold_answers(evaluation.examples)
        if not any(gold.values()):  # a file without answers: nothing to score
            return written
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
        self.results = scores
        return written

    def export_options(self) -> dict:
        return {"max_query_length": self.options["max_query_length"]}


TASK = SquadTask
