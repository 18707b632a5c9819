"""`run_pretraining.py`: MLM + SOP pretraining as the original, on tf.distribute.

The flags are the options of the task module `albert_tf.tasks.pretraining` (what
pretraining is: its options, checks, model, objective, data streams, metrics, serving
kind), made flags here; the run is its own short flow on the driver's session pieces.
"""

from __future__ import annotations

import os

from absl import logging

from albert_tf.apps import session
from albert_tf.apps.model_files import save_model_files
from albert_tf.apps.options import define_flags as define_option_flags
from albert_tf.apps.options import from_flags
from albert_tf.tasks.pretraining import PretrainingTask
from albert_tf.training import distribute
from albert_tf.training.loop import evaluate


def define_flags():
    define_option_flags(PretrainingTask.Options)


def options_from_flags():
    """The run's options, from the parsed flags."""
    return from_flags(PretrainingTask.Options)


def run(options) -> dict:
    """Trains and/or evaluates; returns the eval results (empty without do_eval).
    `options`: a mapping of run_pretraining.py's flags, or `PretrainingTask.Options`."""
    task, options = session.checked_task(PretrainingTask, options)
    context = session.setup(options)
    strategy, config = context.strategy, context.config
    distribute.per_replica_batch_size(options.train_batch_size, strategy)
    distribute.per_replica_batch_size(options.eval_batch_size, strategy, "eval_batch_size")
    with strategy.scope():
        model = task.build_model(config)
        optimizer = session.make_optimizer(
            learning_rate=options.learning_rate,
            num_train_steps=options.num_train_steps,
            num_warmup_steps=options.num_warmup_steps,
            optimizer=options.optimizer, precision=options.precision,
            start_warmup_step=options.start_warmup_step,
            poly_power=options.poly_power)
    session.initialize_from(model, context)
    trainer = session.make_trainer(options, strategy, model, optimizer, task.objective(),
                                   context.output_dir, options.num_train_steps)
    results = {}
    if distribute.is_chief(strategy):
        save_model_files(options, context.output_dir, config)
    if options.do_train:
        micro_batch = options.train_batch_size // options.gradient_accumulation_steps
        session.train(trainer, task.stream(micro_batch, training=True))
    else:
        trainer.restore()
    if options.do_eval:
        dataset = task.stream(options.eval_batch_size, training=False)(0)
        results = evaluate(strategy, model, dataset, task.batch_metrics,
                           max_steps=options.max_eval_steps)
        results["global_step"] = trainer.step
        if distribute.is_chief(strategy):
            session.write_results(os.path.join(context.output_dir, "eval_results.txt"),
                                  results, summary_step=trainer.step)
    session.export_if_asked(options, strategy, model, task.serving_kind)
    logging.info("done: step %d", trainer.step)
    return results
