"""The one training loop under every script: tf.distribute, checkpoints that resume.

`Trainer` runs a model on a stream of batches with an `Objective` and an optimizer:
- under any tf.distribute strategy (one device, mirrored GPUs, several hosts, TPU): the
  objective's denominators are summed over replicas and micro-batches, so the loss and
  the update equal those of the same global batch on one device;
- several steps per `tf.function` call (`steps_per_loop`), gradient accumulation,
  XLA for the gradient computation (`enable_xla`, a pure function), mixed precision
  (a `keras.optimizers.LossScaleOptimizer` is used as such);
- TF2 checkpoints (`tf.train.Checkpoint` of model and optimizer) every
  `save_checkpoints_steps`, `keep_checkpoint_max` kept, resumed automatically from
  `output_dir` at the same step, schedule and data position; SIGTERM saves and stops;
- dropout masks drawn from (seed, step, micro-batch, replica) (`random_draws`), so a
  resumed run trains exactly as the uninterrupted one;
- TensorBoard summaries (loss terms, learning rate) and a progress line with rate and ETA.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import time
import weakref
from typing import Callable

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import CheckpointError
from albert_tf.data.records import to_model_inputs
from albert_tf.errors import DISK_ADVICE, UserError, short_reason
from albert_tf.export.savedmodel import refuse_frozen_weights
from albert_tf.modeling import recompute as recompute_units
from albert_tf.modeling.common import random_draws
from albert_tf.modeling.real_tokens import inference_graph
from albert_tf.modeling.transformer import AlbertTransformer
from albert_tf.training import distribute
from albert_tf.training.objectives import Objective


def forward(model, features, training: bool):
    """The model on a batch with the original feature names."""
    return model(to_model_inputs(features), training=training)


def infer(model, features):
    """`forward` for inference, traced as inference graphs are (on real tokens only,
    without XLA kernels: `real_tokens.inference_graph`)."""
    with inference_graph():
        return forward(model, features, training=False)


@dataclasses.dataclass
class TrainResult:
    step: int                 # the global step reached
    loss: float | None        # mean loss of the last loop
    # the signal (SIGTERM, SIGINT) that stopped it, saved, before train_steps; else None
    stopped_by_signal: str | None
    checkpoint: str | None    # the last checkpoint written


class Trainer:
    """Trains `model` with `optimizer` on `objective` under `strategy`.

    Create the model and the optimizer inside `strategy.scope()` first.
    """

    def __init__(self, *, strategy: tf.distribute.Strategy, model, optimizer,
                 objective: Objective, output_dir: str, train_steps: int,
                 steps_per_loop: int = 100, save_checkpoints_steps: int = 1000,
                 keep_checkpoint_max: int = 5, gradient_accumulation_steps: int = 1,
                 enable_xla: bool = False, log_steps: int | None = None, seed: int = 0,
                 recompute: str | None = None):
        """`recompute` ("layer", "group" or None): the encoder's units recomputed in the
        backward pass (`albert_tf.modeling.recompute`), unless the model has its own
        `recompute`; a model without an ALBERT encoder is refused."""
        if train_steps < 1:
            raise ValueError(f"train_steps must be >= 1, got {train_steps}")
        if gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1, got "
                             f"{gradient_accumulation_steps}")
        refuse_frozen_weights("training")
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.objective = objective
        self.output_dir = os.fspath(output_dir)
        self.train_steps = train_steps
        self.steps_per_loop = max(1, steps_per_loop)
        self.save_checkpoints_steps = max(1, save_checkpoints_steps)
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.seed = int(seed)
        self.log_steps = log_steps or self.steps_per_loop
        self.use_xla = distribute.use_xla(enable_xla, strategy)
        self.recompute = recompute_units.check_unit(recompute)
        if self.recompute and not any(isinstance(layer, AlbertTransformer)
                                      for layer in model._flatten_layers()):
            raise ValueError(
                f"recompute={self.recompute!r}: {type(model).__name__} has no ALBERT "
                "encoder (AlbertTransformer) whose blocks could be recomputed")
        self.is_chief = distribute.is_chief(strategy)
        # The objective's own layers (a distillation's projection) train beside the
        # model and are checkpointed with it.
        extra = objective.trainable_layers()
        self.variables = [*model.trainable_variables,
                          *(v for layer in extra.values() for v in layer.trainable_variables)]
        with strategy.scope():
            # Slots exist before a restore, so that it assigns them at once.
            optimizer.build(self.variables)
            self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **extra)
        directory = self.output_dir if self.is_chief else os.path.join(
            self.output_dir, f".worker_tmp_{strategy.cluster_resolver.task_id}")
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=keep_checkpoint_max,
            checkpoint_name="ckpt")
        self._stop_requested: str | None = None  # the name of a signal that stops it
        self._train_loop = None

    # ----------------------------------------------------------------- checkpoints
    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def restore(self) -> int:
        """Resumes from the newest readable checkpoint in `output_dir`, if any; returns
        the step. A checkpoint that cannot be read (truncated by a crash on a file
        system without atomic rename, a missing data shard) is reported and the one
        before it is tried; nothing is deleted. When none can be read, CheckpointError:
        the run stops instead of starting again from its initial weights over them."""
        paths = self.checkpoints_oldest_first()
        for path in reversed(paths):
            if self.load(path):
                logging.info("resumed from %s at step %d", path, self.step)
                return self.step
            logging.info("trying the checkpoint before %s", path)
        # (a path the `checkpoint` file lists whose files are gone is no checkpoint)
        unreadable = [p for p in paths if tf.io.gfile.exists(p + ".index")]
        if unreadable:
            raise CheckpointError(
                f"no checkpoint of {self.output_dir} can be read "
                f"({', '.join(os.path.basename(p) for p in unreadable)}; the warnings above "
                "say why): stopping rather than starting again from the initial weights. "
                "Move them out of the directory to start afresh, or put back readable "
                "copies")
        return self.step

    def load(self, path: str, partial: bool = False) -> bool:
        """Restores the checkpoint `path` (model and optimizer; with `partial`, what the
        checkpoint has of them); False, with a warning, when it cannot be read."""
        try:
            status = self.checkpoint.restore(path)
            if partial:
                status.expect_partial()
            else:
                status.assert_existing_objects_matched()
        except (tf.errors.OpError, ValueError, AssertionError) as e:
            logging.warning("checkpoint %s cannot be read (%s)", path,
                            str(e).splitlines()[0][:200])
            return False
        return True

    def checkpoints_oldest_first(self) -> list[str]:
        """The checkpoints of `output_dir`, oldest first: those the `checkpoint` file
        lists, then any other `ckpt-N.index` (a newer one whose `checkpoint` file update
        was lost)."""
        state = None
        try:
            state = tf.train.get_checkpoint_state(self.output_dir)
        except (tf.errors.OpError, ValueError):
            logging.warning("the checkpoint file of %s cannot be read", self.output_dir)
        listed = list(state.all_model_checkpoint_paths) if state else []
        found = [p[:-len(".index")] for p in
                 tf.io.gfile.glob(os.path.join(self.output_dir, "ckpt-*.index"))]
        def number(path):
            tail = os.path.basename(path).rsplit("-", 1)[-1]
            return int(tail) if tail.isdigit() else -1
        names = {os.path.basename(p) for p in listed}
        extra = [p for p in found if os.path.basename(p) not in names]
        return sorted(dict.fromkeys(listed + extra), key=number)

    def save(self) -> str | None:
        """Saves the step's checkpoint (`ckpt-<step>`). A write that fails (no space, no
        permission, a directory that vanished) leaves no half-written checkpoint: its
        temporary files are removed and `CheckpointWriteError` says what to do."""
        step = self.step
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as e:
            prefix = os.path.join(self.manager.directory, f"ckpt-{step}")
            for leftover in tf.io.gfile.glob(prefix + "_temp*"):
                shutil.rmtree(leftover, ignore_errors=True)
            latest = tf.train.latest_checkpoint(self.manager.directory)
            raise CheckpointWriteError(
                f"could not write the checkpoint of step {step} under "
                f"{self.manager.directory} ({type(e).__name__}: {short_reason(e)}): "
                f"{DISK_ADVICE} to resume"
                f"{f' from {os.path.basename(latest)}' if latest else ''}") from None
        if not self.is_chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
            return None
        logging.info("saved checkpoint %s", path)
        return path

    # ------------------------------------------------------------------- the step
    def _replica_step(self, micro_batches):
        """One optimizer step on this replica's share of `micro_batches`; returns this
        replica's part of each loss term (their sum over replicas is the global term)."""
        objective = self.objective
        context = tf.distribute.get_replica_context()

        def all_reduce(values):
            return context.all_reduce(tf.distribute.ReduceOp.SUM, values)

        denominators = objective.global_denominators(
            [objective.denominators(batch) for batch in micro_batches], all_reduce)
        variables = self.variables
        total_grads, total_terms = None, None
        for index, batch in enumerate(micro_batches):
            seed = self._draw_seed(context, index)
            grads, terms = self._gradients(batch, denominators, seed)
            total_grads = grads if total_grads is None else [
                _add_gradients(a, b) for a, b in zip(total_grads, grads)]
            total_terms = terms if total_terms is None else {
                k: total_terms[k] + terms[k] for k in terms}
        self.optimizer.apply_gradients(zip(total_grads, variables))
        return total_terms

    def _draw_seed(self, context, micro_batch):
        """The seed of this replica's random draws (dropout) on `micro_batch` of the
        coming step: a function of (run seed, step, micro-batch, replica) alone, so that
        a resumed run draws what the uninterrupted one draws."""
        fold_in = tf.random.experimental.stateless_fold_in
        seed = tf.constant([self.seed, 0x5EED], tf.int64)
        for part in (self.optimizer.iterations, micro_batch,
                     context.replica_id_in_sync_group):
            seed = fold_in(seed, tf.cast(part, tf.int64))
        return seed

    def _compute_gradients(self, batch, denominators, seed):
        with tf.GradientTape() as tape, random_draws(seed), \
                recompute_units.with_unit(self.recompute):
            outputs = forward(self.model, batch, training=True)
            terms = self.objective.terms(outputs, batch, denominators)
            loss = tf.add_n(list(terms.values()))
            if hasattr(self.optimizer, "scale_loss"):  # float16 loss scaling
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self.variables)
        # Embedding gradients stay IndexedSlices: the global-norm clip then counts them
        # as the original does (one slice per token).
        grads = [tf.zeros_like(v) if g is None else g for g, v in zip(grads, self.variables)]
        return grads, terms

    def _build_train_loop(self):
        self._gradients = tf.function(self._compute_gradients, jit_compile=self.use_xla,
                                      autograph=False)
        accumulation = self.gradient_accumulation_steps

        names = self.objective.term_names

        # A tf.while_loop written out (the loop AutoGraph made of `for _ in
        # tf.range(num_steps)`, iteration bound included): converting the loop's source
        # cost 0.2 s of every run's start, and the step (the model, the loss, the
        # optimizer) is plain TensorFlow ops, traced as it is written.
        def train_loop(iterator, num_steps):
            def step(i, sums):
                micro_batches = tuple(next(iterator) for _ in range(accumulation))
                per_replica = self.strategy.run(self._replica_step, args=(micro_batches,))
                return i + 1, {k: sums[k] + self.strategy.reduce(
                    tf.distribute.ReduceOp.SUM, per_replica[k], axis=None) for k in names}

            _, sums = tf.while_loop(
                lambda i, _: i < num_steps, step,
                (tf.constant(0), {k: tf.constant(0.0) for k in names}),
                maximum_iterations=num_steps)
            return {k: v / tf.cast(num_steps, tf.float32) for k, v in sums.items()}

        return tf.function(train_loop, autograph=False)

    # -------------------------------------------------------------------- training
    def train(self, dataset_fn: Callable[[int], tf.data.Dataset]) -> TrainResult:
        """Trains up to `train_steps`, resuming from `output_dir`.

        `dataset_fn(skip)` returns the training stream of *global* batches with the
        original feature names, `skip` batches in (so a resumed run reads the batches
        the interrupted one would have read next); it should repeat forever.
        """
        start = self.restore()
        if start >= self.train_steps:
            logging.info("already trained: step %d of %d", start, self.train_steps)
            return TrainResult(start, None, None, tf.train.latest_checkpoint(self.output_dir))
        dataset = dataset_fn(start * self.gradient_accumulation_steps)
        iterator = iter(distribute.distribute_dataset(self.strategy, dataset))
        if self._train_loop is None:
            self._train_loop = self._build_train_loop()
        writer = tf.summary.create_file_writer(
            os.path.join(self.output_dir, "train")) if self.is_chief else None
        previous = self._install_sigterm()
        step, last_checkpoint, loss = start, None, None
        began, began_step = time.time(), start
        try:
            while step < self.train_steps and not self._stop_requested:
                next_save = (step // self.save_checkpoints_steps + 1) * \
                    self.save_checkpoints_steps
                num_steps = min(self.steps_per_loop, self.train_steps - step, next_save - step)
                steps = f"{step + 1}" if num_steps == 1 else f"{step + 1}-{step + num_steps}"
                try:
                    with distribute.peer_loss_stops(
                            self.strategy, f"in training steps {steps}",
                            lambda: tf.train.latest_checkpoint(self.output_dir)):
                        terms = self._train_loop(iterator, tf.constant(num_steps))
                except tf.errors.ResourceExhaustedError as e:
                    raise TrainingOutOfMemory(out_of_memory_message(e, step + 1)) from None
                step = self.step
                terms = {k: float(v) for k, v in terms.items()}
                loss = sum(terms.values())
                if not np.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss} at step {step}: stopping")
                self._report(step, terms, loss, began, began_step, writer)
                if step % self.save_checkpoints_steps == 0 or step >= self.train_steps:
                    last_checkpoint = self.save()
            if self._stop_requested and step < self.train_steps:
                logging.warning("%s: stopping at step %d", self._stop_requested, step)
                if step % self.save_checkpoints_steps:
                    last_checkpoint = self.save()
        finally:
            self._restore_sigterm(previous)
            if writer is not None:
                writer.flush()
        stopped = self._stop_requested if step < self.train_steps else None
        return TrainResult(step, loss, stopped,
                           last_checkpoint or tf.train.latest_checkpoint(self.output_dir))

    def _report(self, step, terms, loss, began, began_step, writer):
        learning_rate = self.optimizer.learning_rate
        learning_rate = float(tf.convert_to_tensor(getattr(learning_rate, "value",
                                                           learning_rate)))
        elapsed = max(time.time() - began, 1e-9)
        rate = (step - began_step) / elapsed
        eta = (self.train_steps - step) / rate if rate > 0 else float("inf")
        parts = "".join(f"  {k} {v:.4f}" for k, v in terms.items()) if len(terms) > 1 else ""
        logging.info("step %d/%d  loss %.4f%s  lr %.3g  %.2f steps/s  ETA %s", step,
                     self.train_steps, loss, parts, learning_rate, rate, _duration(eta))
        if writer is not None:
            with writer.as_default(step=step):
                tf.summary.scalar("loss", loss)
                tf.summary.scalar("learning_rate", learning_rate)
                tf.summary.scalar("steps_per_second", rate)
                for name, value in terms.items():
                    tf.summary.scalar(name, value)

    # ------------------------------------------------------------------- signals
    def _install_sigterm(self):
        """SIGTERM and SIGINT (Ctrl-C) stop training at the end of the running loop, its
        checkpoint saved (`_stop_requested`: the signal's name); a second Ctrl-C stops at
        once. Returns the handlers to put back."""
        def request_stop(signum, frame):
            name = signal.Signals(signum).name
            if name == "SIGINT" and self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = name
            logging.warning("%s: stopping after the running steps, their checkpoint saved"
                            "%s", name, " (Ctrl-C again: at once)" if name == "SIGINT" else "")

        try:
            return {number: signal.signal(number, request_stop)
                    for number in (signal.SIGTERM, signal.SIGINT)}
        except ValueError:  # not the main thread: leave signals alone
            return None

    def _restore_sigterm(self, previous):
        for number, handler in (previous or {}).items():
            signal.signal(number, handler)


class TrainingStopped(UserError):
    """Training stopped by a signal (SIGTERM, SIGINT), its checkpoint saved: a rerun of
    the same command resumes it."""


class CheckpointWriteError(UserError):
    """A checkpoint that could not be written (no space, no permission): its temporary
    files removed, the run stopped in one line."""


class TrainingOutOfMemory(RuntimeError):
    """A training step that does not fit in the device's memory."""


def out_of_memory_message(error: tf.errors.ResourceExhaustedError, step: int) -> str:
    """What a step that ran out of memory needed, as TensorFlow reports it (the tensor
    it could not allocate, its size and device), and what to change."""
    text = error.message
    found = re.search(r"shape\s*\[([\d,\s]*)\]\s*and type (\w+)", text)
    device = re.search(r"on (/\S*device:\S+?)(?: by|$|\s)", text)
    if found:
        shape = [int(d) for d in found.group(1).replace(" ", "").split(",") if d]
        size = int(np.prod(shape, dtype=np.int64)) * _dtype_bytes(found.group(2))
        needed = (f"TensorFlow could not allocate a {found.group(2)} tensor of shape "
                  f"{shape} ({size / 2**20:,.1f} MiB)"
                  + (f" on {device.group(1).split('device:')[-1]}" if device else ""))
    else:
        needed = "TensorFlow: " + text.strip().splitlines()[0]
    return (f"out of memory in training step {step}: {needed}. This batch does not fit: "
            "recompute the encoder's layers (--recompute; docs/large-models.md), "
            "or lower --train_batch_size and raise "
            "--gradient_accumulation_steps for the same update")


def _dtype_bytes(name: str) -> int:
    """Bytes per element of TensorFlow's type `name` as its messages spell it ("float",
    "half", "bfloat16", ...); 4 for a name TensorFlow does not know."""
    try:
        return tf.as_dtype(name).size
    except TypeError:
        return 4


def _add_gradients(a, b):
    """a + b; IndexedSlices (embedding gradients) are joined, not densified, so that
    accumulated micro-batches give the slices one batch would (the same clip norm)."""
    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0),
                                tf.concat([a.indices, b.indices], 0), a.dense_shape)
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def _duration(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


# Each model's inference step functions, by what they compute (the strategy and the
# outputs and features, or the metric function): evaluating every kept checkpoint
# traces the step once, not once per checkpoint (0.5 s each for the tiny classifier of
# the script tests). Variables are read when a step runs: a loaded checkpoint's
# weights. The functions hold the model weakly (`build(model_ref)`), so that it is freed
# with them (a metric function must not hold it either).
_STEP_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _step_function(model, key, build):
    functions = _STEP_FUNCTIONS.setdefault(model, {})
    if key not in functions:
        functions[key] = build(weakref.ref(model))
    return functions[key]


def _trace_for_every_shape(step, batches) -> None:
    """Traces `step` (once: a later call finds the trace) for batches of any shape,
    where `batches` is a plain dataset of tensors (`distribute_dataset` on the host):
    the batches are padded each to its own longest row, and a step traced for the
    first batch's shape was traced again for the second's (0.6 s of a tiny
    run_classifier.py run's 7 s on a 2-core AVX2 machine, 2026-12-02)."""
    if not isinstance(batches, tf.data.Dataset):
        return
    specs = batches.element_spec
    if all(type(s) is tf.TensorSpec for s in tf.nest.flatten(specs)):
        step.get_concrete_function(tf.nest.map_structure(
            lambda s: tf.TensorSpec([None] * s.shape.rank, s.dtype), specs))


def predict(strategy: tf.distribute.Strategy, model, dataset: tf.data.Dataset,
            output_keys, feature_keys=()) -> dict[str, np.ndarray]:
    """Runs `model` over a finite dataset of global batches; returns the chosen outputs
    (and features, e.g. labels or unique ids) of every example, in order, as numpy.
    The model runs as `infer` runs it (on real tokens only), as in `evaluate`.

    Sequence outputs are padded per batch; they come back as lists of arrays.
    """
    output_keys, feature_keys = tuple(output_keys), tuple(feature_keys)

    def build(model_ref):
        @tf.function(reduce_retracing=True, autograph=False)  # plain ops: no conversion
        def step(batch):
            def replica_fn(batch):
                outputs = infer(model_ref(), batch)
                result = {k: outputs[k] for k in output_keys}
                result.update({k: batch[k] for k in feature_keys})
                return result
            # every replica's rows, of every worker, in the order of the global batch
            return {k: strategy.gather(v, axis=0)
                    for k, v in strategy.run(replica_fn, args=(batch,)).items()}
        return step

    step = _step_function(model, ("predict", strategy, output_keys, feature_keys), build)
    collected: dict[str, list] = {k: [] for k in (*output_keys, *feature_keys)}
    batches = distribute.distribute_dataset(strategy, dataset)
    _trace_for_every_shape(step, batches)
    with distribute.peer_loss_stops(strategy, "in prediction"):
        for batch in batches:
            for key, value in step(batch).items():
                collected[key].extend(np.asarray(value))
    return {k: _stack(v) for k, v in collected.items()}


def _stack(rows):
    shapes = {np.shape(r) for r in rows}
    return np.stack(rows) if len(shapes) <= 1 else rows


def evaluate(strategy: tf.distribute.Strategy, model, dataset: tf.data.Dataset,
             metric_fn, max_steps: int | None = None) -> dict[str, float]:
    """Sums `metric_fn(outputs, features) -> {name: (sum, count)}` over a dataset of
    global batches (at most `max_steps` of them) on every replica; returns sum / count
    for each name."""
    def build(model_ref):
        @tf.function(reduce_retracing=True, autograph=False)  # plain ops: no conversion
        def step(batch):
            def replica_fn(batch):
                return metric_fn(infer(model_ref(), batch), batch)
            per_replica = strategy.run(replica_fn, args=(batch,))
            return {k: (strategy.reduce(tf.distribute.ReduceOp.SUM, s, axis=None),
                        strategy.reduce(tf.distribute.ReduceOp.SUM, c, axis=None))
                    for k, (s, c) in per_replica.items()}
        return step

    step = _step_function(model, ("evaluate", strategy, metric_fn), build)
    totals: dict[str, list[float]] = {}
    if max_steps is not None:
        dataset = dataset.take(max_steps)
    batches = distribute.distribute_dataset(strategy, dataset)
    _trace_for_every_shape(step, batches)
    with distribute.peer_loss_stops(strategy, "in evaluation"):
        for batch in batches:
            for name, (value, count) in step(batch).items():
                total = totals.setdefault(name, [0.0, 0.0])
                total[0] += float(value)
                total[1] += float(count)
    return {name: s / c if c else float("nan") for name, (s, c) in totals.items()}
