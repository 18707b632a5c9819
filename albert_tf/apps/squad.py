"""`run_squad.py`: SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original
run_squad_v1.py / run_squad_v2.py; predictions, n-best, null odds and the official
EM / F1.

The flags are defined here; the task is `albert_tf.tasks.squad`, run by the one
fine-tuning driver (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from absl import flags

from albert_tf.apps import common, driver
from albert_tf.tasks.squad import SquadTask


def define_flags():
    common.define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
    flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and score).")
    flags.DEFINE_string("train_feature_file", None,
                        "Cached training features (default: output_dir/train.tf_record).")
    flags.DEFINE_string("predict_feature_file", None,
                        "Cached prediction features (default: "
                        "output_dir/predict.tf_record).")
    flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: unanswerable questions.")
    flags.DEFINE_bool("do_predict", False, "Predict --predict_file.")
    flags.DEFINE_integer("max_seq_length", 384, "Maximum sequence length.")
    flags.DEFINE_integer("doc_stride", 128, "Stride between paragraph windows.")
    flags.DEFINE_integer("max_query_length", 64, "Maximum question length in tokens.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs (over the examples).")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps spent warming up.")
    flags.DEFINE_integer("n_best_size", 20, "Candidates per question in nbest_predictions.")
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
    flags.DEFINE_integer("start_n_top", 5, "v2.0: start positions of the beam.")
    flags.DEFINE_integer("end_n_top", 5, "v2.0: end positions per start.")
    flags.DEFINE_float("null_score_diff_threshold", 0.0,
                       "v2.0: predict no answer when the null score exceeds the best span "
                       "by more than this.")


FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames(__name__)  # those defined above


def run(settings: dict) -> dict:
    """Trains and/or predicts; returns the official scores of the predictions when the
    predict file has answers."""
    return driver.run(SquadTask, common.typed_options(settings, FLAG_NAMES))
