"""`run_pretraining.py`: MLM + SOP pretraining as the original, on tf.distribute.

The flags common to every run and pretraining's step and batch flags are defined here;
what pretraining is (its data flags, checks, model, objective, data streams, metrics,
serving kind) is the task module `albert_tf.tasks.pretraining`.
"""

from __future__ import annotations

import os

from absl import flags, logging

from albert_tf.apps import session
from albert_tf.apps.model_files import complete_model_files
from albert_tf.apps.options import typed_options
from albert_tf.apps.script_flags import (
    MODEL_FLAG_NAMES,
    FlagNames,
    define_model_flags,
    define_skip_flag,
)
from albert_tf.tasks.pretraining import PretrainingTask
from albert_tf.training import distribute
from albert_tf.training.loop import evaluate


def define_flags():
    define_model_flags(learning_rate=0.00176, optimizer="lamb")
    flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the records.")
    flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 64, "Global evaluation batch size.")
    flags.DEFINE_integer("num_train_steps", 125000, "Training steps.")
    flags.DEFINE_integer("num_warmup_steps", 3125, "Warmup steps.")
    flags.DEFINE_integer("start_warmup_step", 0, "Step at which warmup starts.")
    flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay.")
    PretrainingTask.define_flags()
    define_skip_flag()  # --input_text's unreadable lines


# Those defined above, the task module's included.
FLAG_NAMES = MODEL_FLAG_NAMES + FlagNames(__name__, PretrainingTask.__module__)


def run(options: dict) -> dict:
    """Trains and/or evaluates; returns the eval results (empty without do_eval)."""
    options = complete_model_files(typed_options(options, FLAG_NAMES))
    task = PretrainingTask(options)
    session.check_recompute(options)
    task.validate()
    session.check_exports(options, task.serving_kind)
    context = session.setup(**options)
    strategy, config = context.strategy, context.config
    distribute.per_replica_batch_size(options["train_batch_size"], strategy)
    distribute.per_replica_batch_size(options["eval_batch_size"], strategy, "eval_batch_size")
    with strategy.scope():
        model = task.build_model(config)
        optimizer = session.make_optimizer(
            learning_rate=options["learning_rate"],
            num_train_steps=options["num_train_steps"],
            num_warmup_steps=options["num_warmup_steps"],
            optimizer=options["optimizer"], precision=options["precision"],
            start_warmup_step=options["start_warmup_step"],
            poly_power=options["poly_power"])
    session.initialize_from(model, context)
    trainer = session.make_trainer(options, strategy, model, optimizer, task.objective(),
                                   context.output_dir, options["num_train_steps"])
    results = {}
    if options["do_train"]:
        micro_batch = options["train_batch_size"] // options["gradient_accumulation_steps"]
        session.train(trainer, task.stream(micro_batch, training=True))
    else:
        trainer.restore()
    if options["do_eval"]:
        dataset = task.stream(options["eval_batch_size"], training=False)(0)
        results = evaluate(strategy, model, dataset, task.batch_metrics,
                           max_steps=options["max_eval_steps"])
        results["global_step"] = trainer.step
        if distribute.is_chief(strategy):
            session.write_results(os.path.join(context.output_dir, "eval_results.txt"),
                                  results, summary_step=trainer.step)
    session.export_if_asked(options, strategy, model, task.serving_kind)
    logging.info("done: step %d", trainer.step)
    return results
