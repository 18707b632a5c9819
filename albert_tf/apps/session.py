"""One fine-tuning or pretraining run's machinery, which the driver
(`albert_tf.apps.driver`) and the pretraining app share: the strategy, precision, seeds
and output-directory lock (`check_setup`, `setup`; `removed_if_stopped` undoes a
directory a run made before it stopped), the tokenizer; the original optimizer and the
`Trainer`; initialization, training and the final TF1 checkpoint; every kept checkpoint
evaluated with the best (`metric_goal`) kept as `model.ckpt-best`; results files
(`albert_tf.evaluation.results`); the exports a run asks for.

(The options are `albert_tf.tasks.options`, made flags by `albert_tf.apps.options`; the
model's files `albert_tf.apps.model_files`, the errors that mean bad input
`albert_tf.apps.runner`, the checks before a run `albert_tf.tasks.checks`.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import keras
import tensorflow as tf
from absl import logging

from albert_tf import checkpoints
from albert_tf.apps import distill
from albert_tf.apps.model_files import check_length, complete_model_files, load_config
from albert_tf.apps.runner import user_errors
from albert_tf.checkpoints import release
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError, short_reason
from albert_tf.evaluation.results import write_results
from albert_tf.export.base import ExportError
from albert_tf.export.savedmodel import refuse_frozen_weights
from albert_tf.export.tflite import check_tflite_path
from albert_tf.tasks.checks import BEST_CHECKPOINT, LORA_ADAPTER
from albert_tf.tasks.options import DistillationOptions, FineTuningOptions, RunOptions
from albert_tf.training import distribute
from albert_tf.training.loop import Trainer, TrainingStopped, predict
from albert_tf.training.optimizers import create_optimizer


@dataclasses.dataclass
class RunContext:
    """The strategy, the config and the helpers of one run."""

    strategy: tf.distribute.Strategy
    config: AlbertConfig
    output_dir: str
    created_output_dir: bool = False  # this run made the directory
    # --init_checkpoint, described once (`model_files.complete_model_files`), or None
    init_files: object = None


def checked_tflite_path(path):
    """`--export_tflite`, checked before any work starts (None when not given)."""
    if not path:
        return None
    try:
        return check_tflite_path(path)
    except ExportError as e:
        raise UsageError(f"--export_tflite: {e}") from None


def checked_task(task_class, options):
    """(the task, the run's options) of `options` (a mapping, or `task_class.Options`),
    completed with what --init_checkpoint brings and checked before any work: the
    task's own checks (`validate`), --recompute and the exports asked for. The threads
    are set first, before anything starts TensorFlow."""
    options = task_class.Options.build(options)
    distribute.set_threads(options.intra_op_threads, options.inter_op_threads)
    check_distilled(task_class, options)
    options = complete_model_files(options)
    task = task_class(options)
    check_recompute(options)
    check_lora(options, task)
    options.validate()
    check_exports(options, task.serving_kind)
    return task, options


def check_distilled(task_class, options) -> None:
    """Distillation's options (`DistillationOptions`, which every run has) given to a
    task that is not distilled (no soft targets: `Task.Teaching.soft_loss`), before any
    work."""
    if task_class.Teaching.soft_loss is not None:
        return
    given = [field.name for field in dataclasses.fields(DistillationOptions)
             if field.metadata.get("flag", True) and
             getattr(options, field.name) != field.default]
    if given:
        raise UsageError(f"{', '.join('--' + name for name in given)}: the task "
                         f"{task_class.name!r} is not distilled here (its kind has no "
                         "soft targets defined)")


def check_lora(options, task) -> None:
    """--lora_rank an integer >= 1 on a task whose model takes adapters; --lora_ffn
    only with it."""
    rank = options.lora_rank
    if rank is None:
        if options.lora_ffn:
            raise UsageError("--lora_ffn needs --lora_rank")
        return
    if rank < 1:
        raise UsageError(f"--lora_rank must be an integer >= 1, got {rank}")
    model_class = task.serving_kind.model_class
    if not callable(getattr(model_class, "enable_lora", None)):
        raise UsageError(f"--lora_rank: the model of the task {task.name!r} "
                         f"({model_class.__name__}) takes no LoRA adapters")


def check_setup(options: RunOptions) -> AlbertConfig:
    """What `setup` checks before it starts anything (`UsageError`s): the output
    directory given, the LiteRT path, weights that training can change, the config and
    `max_seq_length` within it. Returns the config."""
    if not options.output_dir:
        raise UsageError("--output_dir is required")
    checked_tflite_path(options.export_tflite)
    # Training, and evaluating one checkpoint after another, change the weights.
    refuse_frozen_weights("this script", UsageError)
    init_files = options.init_files
    config = load_config(options.albert_config_file,
                         init_files.layout if init_files is not None else "google")
    config = distill.student_config(options, config)
    check_length(options.max_seq_length, config, "the model's",
                 f" in {options.albert_config_file}")
    return config


def setup(options: RunOptions) -> RunContext:
    """Config, strategy, precision and seeds; errors before any work starts
    (`check_setup`). Creates and locks the output directory."""
    config = check_setup(options)
    output_dir = options.output_dir
    seed_and_precision(options)
    strategy = distribute.get_strategy(options.distribution_strategy, tpu=options.tpu,
                                       num_gpus=options.num_gpus,
                                       heartbeat_timeout=options.heartbeat_timeout)
    created = not tf.io.gfile.isdir(output_dir)
    try:
        tf.io.gfile.makedirs(output_dir)
    except (tf.errors.OpError, OSError) as e:
        raise UsageError(f"--output_dir={output_dir} cannot be created ({short_reason(e)}): "
                         "give a directory this user can write") from None
    if distribute.is_chief(strategy):  # one run per output directory
        from albert_tf.training import lock

        lock.acquire(output_dir)
    logging.info("%s with %d replicas; precision %s", type(strategy).__name__,
                 strategy.num_replicas_in_sync, options.precision)
    return RunContext(strategy, config, os.fspath(output_dir), created,
                      options.init_files)


def seed_and_precision(options: RunOptions) -> None:
    """The process's global seed (--seed: with each op's own, it fixes the data order and
    every other draw) and Keras' dtype policy (--precision), as every run sets them."""
    keras.utils.set_random_seed(options.seed)
    keras.mixed_precision.set_dtype_policy(options.precision)


@contextlib.contextmanager
def removed_if_stopped(context: RunContext):
    """Until training starts: a run stopped by a user error (bad data, a task's broken
    promise) removes the output directory it created, lock and all, and leaves one it
    did not create as it was (nothing is written there before this block ends)."""
    try:
        yield
    except (*user_errors(), KeyboardInterrupt):
        if context.created_output_dir and distribute.is_chief(context.strategy):
            from albert_tf.training import lock

            lock.release(os.path.join(context.output_dir, lock.LOCK_NAME))
            if tf.io.gfile.isdir(context.output_dir):
                tf.io.gfile.rmtree(context.output_dir)
            logging.info("removed %s, which this run had created", context.output_dir)
        raise


def tokenizer(options: RunOptions):
    """The run's Python tokenizer (`--spm_model_file` or `--vocab_file`,
    `--do_lower_case`)."""
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(vocab_file=options.vocab_file,
                         do_lower_case=options.do_lower_case,
                         spm_model_file=options.spm_model_file)


def check_batch_sizes(options: FineTuningOptions, strategy) -> None:
    """The batch sizes the run uses, checked against the replicas."""
    for flag, size, used in (
            ("train_batch_size", options.train_batch_size, options.do_train),
            ("eval_batch_size", options.eval_batch_size, options.do_eval),
            ("predict_batch_size", options.predict_batch_size, options.do_predict)):
        if used:
            distribute.per_replica_batch_size(size, strategy, flag)


def make_optimizer(*, learning_rate, num_train_steps, num_warmup_steps, optimizer="adamw",
                   precision="float32", **kwargs):
    """The original optimizer; wrapped for loss scaling under float16."""
    result = create_optimizer(learning_rate, num_train_steps, num_warmup_steps,
                              optimizer=optimizer, **kwargs)
    if precision == "mixed_float16":
        result = keras.optimizers.LossScaleOptimizer(result)
    return result


def make_trainer(options: RunOptions, strategy, model, optimizer, objective, output_dir: str,
                 train_steps: int):
    """The run's `Trainer`: checkpoints, loop length, accumulation, XLA and the seed of
    its random draws (dropout) from the common flags."""
    return Trainer(
        strategy=strategy, model=model, optimizer=optimizer, objective=objective,
        output_dir=output_dir, train_steps=train_steps,
        steps_per_loop=options.iterations_per_loop,
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        enable_xla=options.enable_xla, seed=options.seed,
        recompute=options.recompute_unit if options.recompute else None)


def train(trainer, dataset_fn):
    """`trainer.train(dataset_fn)`; a run stopped by a signal (`TrainingStopped`) says
    how to resume, in one line. When it reached its last step, the chief then keeps
    the final weights as the original's `model.ckpt-<step>` (TF1 names, as its
    Estimator wrote them): what `export_savedmodel.py --checkpoint`, `--init_checkpoint`
    and the original code read. (The run's own `ckpt-N` are object-based checkpoints for
    resuming, with the optimizer's slots.) Returns the `TrainResult`."""
    result = trainer.train(dataset_fn)
    if result.stopped_by_signal:
        saved = os.path.basename(result.checkpoint or "") or "none yet"
        raise TrainingStopped(
            f"{result.stopped_by_signal}: training stopped at step {result.step} of "
            f"{trainer.train_steps} (checkpoint: {saved}); rerun the same command to "
            "resume")
    if distribute.is_chief(trainer.strategy):
        path = os.path.join(trainer.output_dir, f"model.ckpt-{result.step}")
        checkpoints.save_tf1_checkpoint(trainer.model, path, global_step=result.step)
        logging.info("TF1 checkpoint of the trained model: %s", path)
    return result


def initialize_from(model, context: RunContext) -> None:
    """Loads the run's --init_checkpoint (`context.init_files`, any layout, by name:
    `release.load_checkpoint`) unless the output directory holds a checkpoint to resume
    from (which then wins, as in the original)."""
    files = context.init_files
    if files is None:
        return
    if tf.train.latest_checkpoint(context.output_dir):
        logging.info("not loading %s: resuming from %s", files.checkpoint,
                     context.output_dir)
        return
    report = release.load_checkpoint(model, files)
    logging.info("initialized from %s:\n%s", files.checkpoint, report)


# The flags that each ask for the trained model in some form (`export_if_asked`).
def exporting(options: RunOptions) -> bool:
    """Whether the run writes its model in any form at the end."""
    return bool(options.export_dir or options.export_tflite or options.export_hf_dir)


def check_recompute(options: RunOptions) -> None:
    """`--recompute`, checked before any work: it changes how training keeps what its
    backward pass needs, so a run that does not train is refused."""
    if options.recompute and not options.do_train:
        raise UsageError("--recompute changes what training keeps in memory; this run "
                         "does not train (--do_train is off): leave --recompute out")


def check_exports(options: RunOptions, kind, *, export_preprocessor: str | None = None,
                  version: int | None = None) -> None:
    """The exports asked for, checked before any work (one-line `UsageError`s naming
    the flag): `--export_dir` (and export_savedmodel.py's `--export_preprocessor`, at
    its `--version`) can hold a new version directory (`albert_tf.export.check_export_dir`:
    not a file); `--export_tflite` names a new file (`checked_tflite_path`: an existing
    one is never overwritten); `--export_hf_dir` is not a file and holds nothing yet;
    `--tflite_text` needs `--export_tflite`, a kind whose text LiteRT can pack and the
    tokenizer's files."""
    from albert_tf.export.base import check_export_dir, file_in_the_way

    for flag, path in (("export_dir", options.export_dir),
                       ("export_preprocessor", export_preprocessor)):
        if path:
            try:
                check_export_dir(path, version)
            except ValueError as e:
                raise UsageError(f"--{flag}: {e}") from None
    checked_tflite_path(options.export_tflite)
    hf_dir = options.export_hf_dir
    if hf_dir:
        in_the_way = file_in_the_way(hf_dir)
        if in_the_way is not None:
            raise UsageError(f"--export_hf_dir: {in_the_way} is a file; the Hugging Face "
                             "export is a directory")
        if tf.io.gfile.isdir(hf_dir) and tf.io.gfile.listdir(hf_dir):
            raise UsageError(f"--export_hf_dir: {hf_dir} exists and is not empty; an "
                             "export is never written over: give a new directory")
    if not options.tflite_text:
        return
    if not options.export_tflite:
        raise UsageError("--tflite_text describes the --export_tflite file: give both")
    from albert_tf.export.tflite import check_text_export

    try:
        check_text_export(kind, options.spm_model_file, options.vocab_file)
    except ValueError as e:
        raise UsageError(f"--tflite_text: {e}") from None


def export_if_asked(options: RunOptions, strategy, model, kind: str, *, labels=None,
                    **export_options) -> str | None:
    """With `--export_hf_dir`, writes `model` as a Hugging Face directory (`labels` name
    a classifier's outputs); with `--export_dir`, exports it as `kind` (see
    `albert_tf.export`) with the run's tokenizer and `max_seq_length`; with
    `--export_tflite`, writes it as one LiteRT file (`tflite_precision`). The chief
    alone writes. Returns the SavedModel version directory written. What
    `check_exports` checked may have changed during the run (a file appeared where an
    export goes): that is a one-line `UsageError` naming the flag too."""
    if not distribute.is_chief(strategy):
        return None
    if options.export_hf_dir:
        from albert_tf.checkpoints.huggingface import save_hf_checkpoint

        with _export_errors("export_hf_dir"):
            save_hf_checkpoint(model, options.export_hf_dir,
                               spm_model_file=options.spm_model_file,
                               vocab_file=options.vocab_file,
                               do_lower_case=options.do_lower_case, labels=labels)
        logging.info("wrote the Hugging Face directory %s", options.export_hf_dir)
    if options.export_tflite:
        from albert_tf.export import export_tflite

        with _export_errors("export_tflite"):
            export_tflite(model, options.export_tflite, kind=kind,
                          precision=options.tflite_precision, labels=labels,
                          task_name=export_options.get("task_name"),
                          max_seq_length=options.max_seq_length,
                          do_lower_case=options.do_lower_case,
                          with_text=options.tflite_text,
                          spm_model_file=options.spm_model_file,
                          vocab_file=options.vocab_file,
                          is_pair=export_options.get("is_pair"),
                          long_text=export_options.get("long_text"))
        logging.info("wrote the LiteRT file %s", options.export_tflite)
    if not options.export_dir:
        return None
    if labels is not None:
        export_options["labels"] = labels
    from albert_tf.export import export_savedmodel

    with _export_errors("export_dir"):
        path = export_savedmodel(
            model, options.export_dir, kind=kind,
            spm_model_file=options.spm_model_file, vocab_file=options.vocab_file,
            do_lower_case=options.do_lower_case,
            max_seq_length=options.max_seq_length,
            serving_precision=options.serving_precision, **export_options)
    logging.info("exported the SavedModel to %s", path)
    return path


@contextlib.contextmanager
def _export_errors(flag: str):
    """An export's refusal (`ExportError`, a directory that appeared meanwhile) as the
    one-line `UsageError` of `--<flag>`."""
    try:
        yield
    except (ExportError, FileExistsError) as e:
        raise UsageError(f"--{flag}: {e}") from None


def load_best_or_latest(trainer, output_dir) -> None:
    """The kept best checkpoint (model.ckpt-best) if there is one, else the latest (as
    the chief wrote them: every worker reads the same)."""
    distribute.barrier(trainer.strategy)
    best = os.path.join(output_dir, BEST_CHECKPOINT)
    if not tf.io.gfile.exists(best + ".index"):
        trainer.restore()
    if getattr(trainer.model, "lora_rank", None):
        # The adapters folded in: what predicts and is exported is a plain model of
        # the base's cost (model.ckpt-best holds such weights).
        with trainer.strategy.scope():
            trainer.model = trainer.model.merge_lora()
    if tf.io.gfile.exists(best + ".index"):
        checkpoints.load_tf1_checkpoint(trainer.model, best, strict=True)


def better(value, best, goal: str = "max") -> bool:
    """Whether a dev result `value` beats `best` for a metric that is better higher
    (`goal` "max") or lower ("min"); a NaN never does."""
    return value < best if goal == "min" else value > best


def evaluate_checkpoints(task, dev, trainer, options, path, output_dir) -> dict:
    """Evaluates every kept checkpoint on the dev set (eval_results.txt ends with the
    latest; TensorBoard gets each) and keeps the best by the task's metric as
    `model.ckpt-best` (TF1 format, readable by the original code) with
    `best_trial.txt`. `task` is an `albert_tf.tasks.Task`: `task.data.dataset` reads the
    dev records at `path` in order, `task.metrics(dev, outputs)` scores them (the model
    outputs `task.data.eval_outputs` and the features `task.data.fetched_features`, a
    row per example: `task.data.example_outputs`) and
    `task.metric` names the result to keep the best of, the highest or, where
    `task.metric_goal` is "min" (an error, a loss), the lowest; the first of ties."""
    dataset = task.data.dataset(path, options.eval_batch_size, False)
    # every worker evaluates the chief's checkpoints, once they are written
    distribute.barrier(trainer.strategy)
    checkpoints_to_try = trainer.checkpoints_oldest_first() or [None]
    best, best_step = None, None
    for checkpoint in checkpoints_to_try:
        if checkpoint is not None and not trainer.load(checkpoint, partial=True):
            continue  # unreadable: reported, not evaluated
        results = task.metrics(dev, task.data.example_outputs(predict(
            trainer.strategy, trainer.model, dataset, list(task.data.eval_outputs),
            task.data.fetched_features(dataset))))
        results["global_step"] = trainer.step
        if distribute.is_chief(trainer.strategy):
            write_results(os.path.join(output_dir, "eval_results.txt"), results,
                          summary_step=trainer.step)
        logging.info("dev %s at step %d: %s", task.metric, trainer.step, results[task.metric])
        if best is None or better(results[task.metric], best[task.metric],
                                  task.metric_goal):
            best, best_step = results, trainer.step
            if distribute.is_chief(trainer.strategy):
                checkpoints.save_tf1_checkpoint(trainer.model,
                                                os.path.join(output_dir, BEST_CHECKPOINT),
                                                global_step=trainer.step)
                if getattr(trainer.model, "lora_rank", None):
                    trainer.model.save_lora_weights(os.path.join(output_dir,
                                                                 LORA_ADAPTER))
    if best is None:
        raise UsageError(f"no checkpoint of {output_dir} can be read: nothing to evaluate")
    if distribute.is_chief(trainer.strategy):
        write_results(os.path.join(output_dir, "best_trial.txt"), best,
                      title=f"Best trial (step {best_step})")
    return best

