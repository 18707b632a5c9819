"""`run_pretraining.py`: MLM + SOP pretraining as the original, on tf.distribute."""

from __future__ import annotations

import os

import tensorflow as tf
from absl import flags, logging

from albert_tf import losses, names
from albert_tf.apps import common, session
from albert_tf.data import dynamic_masking, pretraining
from albert_tf.modeling import AlbertPretrainer
from albert_tf.tokenization import FullTokenizer
from albert_tf.training import distribute
from albert_tf.training.loop import evaluate
from albert_tf.training.objectives import PretrainingObjective


def define_flags():
    common.define_model_flags(learning_rate=0.00176, optimizer="lamb")
    flags.DEFINE_string("input_file", None,
                        "Pretraining TFRecords (glob or comma-separated list), as "
                        "create_pretraining_data.py writes them.")
    flags.DEFINE_string("input_text", None,
                        "Raw text (one sentence per line, blank line between documents; "
                        "glob or list) for dynamic masking instead of --input_file.")
    flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the records.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
    flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 64, "Global evaluation batch size.")
    flags.DEFINE_integer("num_train_steps", 125000, "Training steps.")
    flags.DEFINE_integer("num_warmup_steps", 3125, "Warmup steps.")
    flags.DEFINE_integer("start_warmup_step", 0, "Step at which warmup starts.")
    flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay.")
    flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches.")
    # Dynamic masking (with --input_text): the create_pretraining_data flags.
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability (dynamic masking).")
    flags.DEFINE_integer("ngram", 3, "Maximum n-gram to mask (dynamic masking).")
    flags.DEFINE_float("short_seq_prob", 0.1, "Short sequence probability (dynamic masking).")


FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames(__name__)  # those defined above


def pretraining_metrics(outputs, features):
    """The original's eval metrics as (sum, count): masked-LM accuracy and loss
    (weighted by masked_lm_weights), sentence-order accuracy and loss."""
    weights = tf.cast(features[names.MASKED_LM_WEIGHTS], tf.float32)  # [B, P]
    ids = tf.cast(features[names.MASKED_LM_IDS], tf.int32)
    log_probs = losses.log_probabilities(outputs[names.MLM_LOGITS])  # [B, P, V]
    mlm_loss, weight = losses.masked_lm_sums(log_probs, ids, weights)
    correct = tf.cast(tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32), ids),
                      tf.float32)
    labels = tf.reshape(tf.cast(features[names.NEXT_SENTENCE_LABELS], tf.int32), [-1])
    sop = losses.log_probabilities(outputs[names.SOP_LOGITS])  # [B, 2]
    sop_correct = tf.cast(tf.equal(tf.argmax(sop, -1, output_type=tf.int32), labels),
                          tf.float32)
    examples = tf.cast(tf.size(labels), tf.float32)
    return {
        "masked_lm_accuracy": (tf.reduce_sum(weights * correct), weight),
        "masked_lm_loss": (mlm_loss, weight),
        "sentence_order_accuracy": (tf.reduce_sum(sop_correct), examples),
        "sentence_order_loss": (tf.reduce_sum(losses.sentence_order_nll(sop, labels)),
                                examples),
    }


def _dataset_fn(settings, batch_size, training):
    """A function skip -> the global-batch stream from records or from raw text."""
    seed = settings["seed"]
    if settings["input_text"]:
        tokenizer = FullTokenizer(vocab_file=settings["vocab_file"],
                                  do_lower_case=settings["do_lower_case"],
                                  spm_model_file=settings["spm_model_file"])
        config = pretraining.PretrainingDataConfig(
            max_seq_length=settings["max_seq_length"],
            max_predictions_per_seq=settings["max_predictions_per_seq"],
            masked_lm_prob=settings["masked_lm_prob"], ngram=settings["ngram"],
            short_seq_prob=settings["short_seq_prob"], random_seed=seed)
        stream = dynamic_masking.StreamOptions(repeat=training, drop_remainder=True)
        return lambda skip: dynamic_masking.dynamic_pretraining_dataset(
            settings["input_text"], tokenizer, batch_size, config, stream=stream).skip(skip)
    return lambda skip: pretraining.pretraining_dataset(
        settings["input_file"], batch_size, max_seq_length=settings["max_seq_length"],
        max_predictions_per_seq=settings["max_predictions_per_seq"], is_training=training,
        seed=seed, drop_remainder=True).skip(skip)


def validate(settings) -> None:
    if not (settings["do_train"] or settings["do_eval"]):
        raise common.UsageError("nothing to do: give --do_train and/or --do_eval")
    if bool(settings["input_file"]) == bool(settings["input_text"]):
        raise common.UsageError("give exactly one of --input_file (records) and "
                                "--input_text (raw text, dynamic masking)")
    if settings["input_file"]:
        pretraining.expand_input_patterns(settings["input_file"])  # raises when none match
    if settings["input_text"] and not (settings["spm_model_file"] or settings["vocab_file"]):
        raise common.UsageError("--input_text needs --spm_model_file (or --vocab_file)")


def run(settings: dict) -> dict:
    """Trains and/or evaluates; returns the eval results (empty without do_eval)."""
    settings = common.complete_model_files(common.typed_options(settings, FLAG_NAMES))
    validate(settings)
    context = session.setup(**settings)
    strategy, config = context.strategy, context.config
    distribute.per_replica_batch_size(settings["train_batch_size"], strategy)
    distribute.per_replica_batch_size(settings["eval_batch_size"], strategy, "eval_batch_size")
    with strategy.scope():
        model = AlbertPretrainer(config, seed=settings["seed"])
        optimizer = session.make_optimizer(
            learning_rate=settings["learning_rate"],
            num_train_steps=settings["num_train_steps"],
            num_warmup_steps=settings["num_warmup_steps"],
            optimizer=settings["optimizer"], precision=settings["precision"],
            start_warmup_step=settings["start_warmup_step"],
            poly_power=settings["poly_power"])
    session.initialize_from(model, settings["init_checkpoint"], context.output_dir)
    trainer = session.make_trainer(settings, strategy, model, optimizer,
                                   PretrainingObjective(), context.output_dir,
                                   settings["num_train_steps"])
    results = {}
    if settings["do_train"]:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        session.train(trainer, _dataset_fn(settings, micro_batch, training=True))
    else:
        trainer.restore()
    if settings["do_eval"]:
        dataset = _dataset_fn(settings, settings["eval_batch_size"], training=False)(0)
        results = evaluate(strategy, model, dataset, pretraining_metrics,
                           max_steps=settings["max_eval_steps"])
        results["global_step"] = trainer.step
        if distribute.is_chief(strategy):
            session.write_results(os.path.join(context.output_dir, "eval_results.txt"),
                                  results, summary_step=trainer.step)
    session.export_if_asked(settings, strategy, model, "mlm")
    logging.info("done: step %d", trainer.step)
    return results
