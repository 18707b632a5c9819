"""`run_squad.py`: SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original
run_squad_v1.py / run_squad_v2.py; predictions, n-best, null odds and the official
EM / F1 computed here."""

from __future__ import annotations

import json
import math
import os

import tensorflow as tf
from absl import flags

from albert_tf import fileio, losses, names
from albert_tf.apps import common
from albert_tf.data import squad
from albert_tf.evaluation import squad_metrics, squad_postprocess
from albert_tf.modeling import AlbertSquadV1, AlbertSquadV2
from albert_tf.tokenization import FullTokenizer
from albert_tf.training import distribute
from albert_tf.training.loop import predict
from albert_tf.training.objectives import MeanObjective

V1_OUTPUTS = (names.START_LOGITS, names.END_LOGITS)
V2_OUTPUTS = names.SQUAD_V2_OUTPUTS


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


def validate(settings) -> None:
    if not (settings["do_train"] or settings["do_predict"]):
        raise common.UsageError("nothing to do: give --do_train and/or --do_predict")
    if settings["do_train"]:
        common.check_file(settings["train_file"], "train_file")
    if settings["do_predict"]:
        common.check_file(settings["predict_file"], "predict_file")
        if not settings["do_train"] and not tf.train.latest_checkpoint(
                settings["output_dir"] or ""):
            raise common.UsageError(
                f"--do_predict without --do_train needs a trained model in "
                f"--output_dir={settings['output_dir']}, and there is none")
    common.check_file(settings["spm_model_file"], "spm_model_file")
    squad.validate_settings(settings["max_seq_length"], settings["doc_stride"],
                            settings["max_query_length"])


def objective(version_2: bool) -> MeanObjective:
    if version_2:
        return MeanObjective(lambda o, f: losses.squad_v2_loss(
            o["start_log_probs"], o["end_log_probs"], o["cls_logits"],
            f[names.START_POSITIONS], f[names.END_POSITIONS], f[names.IS_IMPOSSIBLE],
            per_example=True))
    return MeanObjective(lambda o, f: losses.squad_v1_loss(
        o[names.START_LOGITS], o[names.END_LOGITS], f[names.START_POSITIONS],
        f[names.END_POSITIONS], per_example=True))


def run(settings: dict) -> dict:
    """Trains and/or predicts; returns the official scores of the predictions when the
    predict file has answers."""
    settings = common.complete_model_files(settings)
    validate(settings)
    context = common.setup(**settings)
    strategy = context.strategy
    version_2 = settings["version_2_with_negative"]
    for flag in ("train_batch_size", "predict_batch_size"):
        distribute.per_replica_batch_size(settings[flag], strategy, flag)
    train, evaluation = load_features(settings, context.output_dir)
    train_steps = 1
    if train is not None:
        # The original: steps = examples / batch * epochs, warmup a proportion of them.
        train_steps = max(1, int(len(train.examples) / settings["train_batch_size"] *
                                 settings["num_train_epochs"]))
    with strategy.scope():
        model = build_model(settings, context.config)
        optimizer = common.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=train_steps,
            num_warmup_steps=int(train_steps * settings["warmup_proportion"]),
            optimizer=settings["optimizer"], precision=settings["precision"])
    common.initialize_from(model, settings["init_checkpoint"], context.output_dir)
    trainer = common.make_trainer(settings, strategy, model, optimizer, objective(version_2),
                                  context.output_dir, train_steps)
    if train is not None:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        common.train(trainer, lambda skip: squad.squad_dataset(
            train.record_file, settings["max_seq_length"], micro_batch, is_training=True,
            training=True, seed=settings["seed"], drop_remainder=True).skip(skip))
    else:
        trainer.restore()
    scores = {}
    if evaluation is not None:
        scores = predict_and_score(trainer, settings, evaluation, context.output_dir)
    common.export_if_asked(settings, strategy, model, "squad_v2" if version_2 else "squad_v1",
                           max_query_length=settings["max_query_length"])
    return scores


def load_features(settings: dict, output_dir: str
                  ) -> tuple[squad.SquadFeatureFile | None, squad.SquadFeatureFile | None]:
    """The training features (in the original's shuffled order) and the prediction
    features (with what post-processing needs), each None when not asked for; converted
    once and cached (by default in `output_dir`)."""
    tokenizer = FullTokenizer(spm_model_file=settings["spm_model_file"],
                              do_lower_case=settings["do_lower_case"])
    lengths = {k: settings[k] for k in ("max_seq_length", "doc_stride", "max_query_length")}
    train = evaluation = None
    if settings["do_train"]:
        train = squad.load_or_build_features(
            settings["train_file"], tokenizer,
            settings["train_feature_file"] or os.path.join(output_dir, "train.tf_record"),
            is_training=True, shuffle_seed=squad.ORIGINAL_TRAIN_SHUFFLE_SEED, **lengths)
    if settings["do_predict"]:
        evaluation = squad.load_or_build_features(
            settings["predict_file"], tokenizer,
            settings["predict_feature_file"] or os.path.join(output_dir, "predict.tf_record"),
            is_training=False, keep_features=True, **lengths)
    return train, evaluation


def build_model(settings: dict, config):
    """The v1.1 span head, or with --version_2_with_negative ALBERT's v2.0 beam head."""
    if settings["version_2_with_negative"]:
        return AlbertSquadV2(config, start_n_top=settings["start_n_top"],
                             end_n_top=settings["end_n_top"], seed=settings["seed"])
    return AlbertSquadV1(config, seed=settings["seed"])


def predict_and_score(trainer, settings, evaluation, output_dir) -> dict:
    version_2 = settings["version_2_with_negative"]
    dataset = squad.squad_dataset(evaluation.record_file, settings["max_seq_length"],
                                  settings["predict_batch_size"], is_training=False)
    keys = V2_OUTPUTS if version_2 else V1_OUTPUTS
    outputs = predict(trainer.strategy, trainer.model, dataset, list(keys), [names.UNIQUE_IDS])
    results = {int(uid): {k: outputs[k][i] for k in keys}
               for i, uid in enumerate(outputs[names.UNIQUE_IDS])}
    if not distribute.is_chief(trainer.strategy):
        return {}
    options = dict(n_best_size=settings["n_best_size"],
                   max_answer_length=settings["max_answer_length"])
    if version_2:
        answers = squad_postprocess.write_predictions_v2(
            evaluation.examples, evaluation.features, results, output_dir,
            null_score_diff_threshold=settings["null_score_diff_threshold"], **options)
    else:
        answers = squad_postprocess.write_predictions_v1(
            evaluation.examples, evaluation.features, results, output_dir, **options)
    gold = squad_metrics.gold_answers(evaluation.examples)
    if not any(gold.values()):  # a file without answers: nothing to score
        return {}
    if version_2:
        scores = squad_metrics.evaluate_v2(gold, answers.predictions, answers.null_odds)
    else:
        scores = squad_metrics.evaluate_v1(gold, answers.predictions)
    scores = {k: v for k, v in scores.items() if not (isinstance(v, float) and math.isnan(v))}
    scores["global_step"] = trainer.step
    common.write_results(os.path.join(output_dir, "eval_results.txt"), scores,
                         summary_step=trainer.step)
    fileio.write_text_atomically(os.path.join(output_dir, "eval_results.json"),
                                 json.dumps(scores, indent=2))
    return scores
