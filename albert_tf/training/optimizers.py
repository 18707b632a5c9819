"""The optimizers of the original google-research/albert, as Keras 3 optimizers.

`AdamWeightDecay` (the original `AdamWeightDecayOptimizer`) and `Lamb` (the original
`LAMBOptimizer`) compute exactly what the original computes:

- Adam moments without bias correction: m <- b1 m + (1 - b1) g, v <- b2 v + (1 - b2) g^2,
  update = m / (sqrt(v) + epsilon);
- decoupled weight decay: `weight_decay_rate * w` is added to the update, except for
  variables whose name matches one of `exclude_from_weight_decay` (re.search on the TF1
  name, which is the Keras `variable.path` here);
- LAMB multiplies the update by the trust ratio ||w|| / ||update|| (1 when either norm
  is 0, and 1 for the names matching `exclude_from_layer_adaptation`, which defaults to
  `exclude_from_weight_decay` as in the original);
- w <- w - lr * update (times the ratio for LAMB).

Gradients are first summed over the replicas (tf.distribute), then clipped to the global
norm `clip_norm` with `tf.clip_by_global_norm`, the function the original uses, so the
clip sees the gradient of the whole global batch. They are clipped as they come: the
`IndexedSlices` of an embedding gather (token types; word embeddings are also the tied
MLM output, so theirs is dense) count one slice per token in the norm, exactly as in the
original, which gathers its embeddings off TPU (`use_one_hot_embeddings=False`).
Densifying such gradients before `apply_gradients` changes the clip slightly. (On
several hosts they are summed dense all the same, and their own norm is summed beside
them, so the clip stays the same: `_densified_across_workers`.)

`optimizer.iterations` is the original `global_step`; it goes up by one with every
update. The original increments it in an op grouped with, but not ordered after, its
`apply_gradients`, and in practice the increment runs first: the update that takes the
step from k to k + 1 uses the learning rate of step k + 1 (a checkpoint at step 0 with
`init_lr=1e-2, num_train_steps=10` gets 9e-3, then 8e-3; the original's own two-step
checkpoints in tests/fixtures show it). The schedule is therefore evaluated at
`iterations + schedule_step_offset`, 1 by default (0: the Keras convention), and
`optimizer.learning_rate` is the rate the next update will use.

The original's slots are `<variable name>/adam_m` and `<variable name>/adam_v` (LAMB's
too); `optimizer.tf1_variables()` names ours that way (with `global_step`), and
`albert_tf.load_tf1_checkpoint(..., optimizer=)` / `save_tf1_checkpoint(..., optimizer=)`
read and write them with `global_step`. A `tf.train.Checkpoint(model=, optimizer=)`
tracks the slots and the step counter as for any Keras optimizer.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

import keras
import tensorflow as tf

from albert_tf.modeling import fused
from albert_tf.training import distribute

# The original's `exclude_from_weight_decay` for both optimizers (and LAMB's default
# `exclude_from_layer_adaptation`).
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZERS = ("adamw", "lamb")
ADAM_M, ADAM_V = "adam_m", "adam_v"


def _variable_name(variable) -> str:
    """The TF1 name of a model variable: its Keras path (a tf.Variable's name without
    the `:0` output suffix otherwise)."""
    path = getattr(variable, "path", None)
    if path:
        return path
    return re.sub(r":\d+$", "", variable.name)


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The learning rate of the original `optimization.create_optimizer`.

    Polynomial decay of `init_lr` to 0 over `num_train_steps` (counted from step 0, not
    from the end of the warmup), `power=poly_power`, constant 0 afterwards; when
    `num_warmup_steps` > 0, steps s with `s - start_warmup_step < num_warmup_steps` use
    the linear warmup `init_lr * (s - start_warmup_step) / num_warmup_steps` instead.
    Computed in float32 with the original's operations.

    One deliberate difference: before `start_warmup_step` the original's warmup rate is
    negative (the step minus the start is negative); here it is 0.
    """

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 start_warmup_step: int = 0, poly_power: float = 1.0):
        if not init_lr >= 0:
            raise ValueError(f"init_lr must be >= 0, got {init_lr}")
        if int(num_train_steps) != num_train_steps or num_train_steps < 1:
            raise ValueError(f"num_train_steps must be an integer >= 1, got {num_train_steps}")
        if int(num_warmup_steps) != num_warmup_steps or num_warmup_steps < 0:
            raise ValueError(
                f"num_warmup_steps must be an integer >= 0, got {num_warmup_steps}")
        if int(start_warmup_step) != start_warmup_step or start_warmup_step < 0:
            raise ValueError(
                f"start_warmup_step must be an integer >= 0, got {start_warmup_step}")
        if not poly_power > 0:
            raise ValueError(f"poly_power must be > 0, got {poly_power}")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.start_warmup_step = int(start_warmup_step)
        self.poly_power = float(poly_power)

    def __call__(self, step):
        with tf.name_scope("warmup_polynomial_decay"):
            step = tf.convert_to_tensor(step)
            # tf.compat.v1.train.polynomial_decay(init_lr, step, num_train_steps,
            # end_learning_rate=0.0, power=poly_power, cycle=False), op for op.
            init_lr = tf.constant(self.init_lr, tf.float32)
            end_lr = tf.constant(0.0, tf.float32)
            decay_steps = tf.constant(float(self.num_train_steps), tf.float32)
            done = tf.minimum(tf.cast(step, tf.float32), decay_steps) / decay_steps
            learning_rate = (init_lr - end_lr) * tf.pow(
                1.0 - done, tf.constant(self.poly_power, tf.float32)) + end_lr
            if not self.num_warmup_steps:
                return learning_rate
            steps_int = tf.cast(step, tf.int32) - tf.constant(self.start_warmup_step, tf.int32)
            warmup_int = tf.constant(self.num_warmup_steps, tf.int32)
            warmup_done = (tf.cast(tf.maximum(steps_int, 0), tf.float32)
                           / tf.cast(warmup_int, tf.float32))
            warmup_learning_rate = self.init_lr * warmup_done
            is_warmup = tf.cast(steps_int < warmup_int, tf.float32)
            return (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "start_warmup_step": self.start_warmup_step,
            "poly_power": self.poly_power,
        }


def _adam_update(grad, param, m, v, lr, *, beta_1, beta_2, epsilon, weight_decay_rate,
                 layer_adaptation):
    """The original's update of one variable: (new param, next m, next v)."""
    dtype = param.dtype
    next_m = tf.cast(beta_1, dtype) * m + tf.cast(1.0 - beta_1, dtype) * grad
    next_v = tf.cast(beta_2, dtype) * v + tf.cast(1.0 - beta_2, dtype) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + tf.cast(epsilon, dtype))
    if weight_decay_rate:
        update += tf.cast(weight_decay_rate, dtype) * param
    if layer_adaptation:
        w_norm = tf.norm(param, ord=2)
        g_norm = tf.norm(update, ord=2)
        ratio = tf.where(w_norm > 0,
                         tf.where(g_norm > 0, w_norm / g_norm, tf.ones_like(w_norm)),
                         tf.ones_like(w_norm))
        return param - ratio * lr * update, next_m, next_v
    return param - lr * update, next_m, next_v


class _Slices(NamedTuple):
    flags: list[bool]      # which gradients were IndexedSlices
    squares: tf.Tensor     # the sum of their values' squares over every replica


def _densified_across_workers(grads_and_vars, clipped: bool):
    """On several hosts, embedding gradients (IndexedSlices, one slice per token) are
    summed as dense tensors: MultiWorkerMirroredStrategy all-gathers slices with a
    collective that needs the same number of slices at every step, and a batch padded
    to its own longest has another at each step. When the gradients are `clipped`,
    their contribution to the global norm, one slice per token as the original counts
    it, is all-reduced beside them, so the clip and the update are those of one
    process. Returns the pairs and that `_Slices` (None where nothing was densified or
    nothing is clipped)."""
    context = tf.distribute.get_replica_context()
    flags = [isinstance(g, tf.IndexedSlices) for g, _ in grads_and_vars]
    if context is None or not any(flags) or \
            not distribute.spans_workers(tf.distribute.get_strategy()):
        return grads_and_vars, None
    sliced = None
    if clipped:
        squares = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g.values, tf.float32)))
                            for (g, _), flag in zip(grads_and_vars, flags) if flag])
        sliced = _Slices(flags, context.all_reduce(tf.distribute.ReduceOp.SUM, squares))
    dense = [(tf.convert_to_tensor(g) if flag else g, v)
             for (g, v), flag in zip(grads_and_vars, flags)]
    return dense, sliced


class _OriginalAdamFamily(keras.optimizers.Optimizer):
    """What the original AdamW and LAMB share: slots, decay exclusions, clipping."""

    _layer_adaptation = False

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.0,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = None,
                 clip_norm: float | None = None, schedule_step_offset: int = 1,
                 name: str | None = None, **kwargs):
        for keras_name, ours in (("weight_decay", "weight_decay_rate"),
                                 ("global_clipnorm", "clip_norm")):
            if kwargs.pop(keras_name, None) is not None:
                raise ValueError(
                    f"{type(self).__name__} does not take Keras's {keras_name}=: use "
                    f"{ours}= (the original's semantics)")
        if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):
            raise RuntimeError(
                f"{type(self).__name__} clips the gradients after their sum over replicas "
                "in the hook `_all_reduce_sum_gradients` of Keras's TensorFlow optimizer, "
                f"which this Keras ({keras.__version__}) lacks")
        if isinstance(learning_rate, int):
            learning_rate = float(learning_rate)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if weight_decay_rate < 0:
            raise ValueError(f"weight_decay_rate must be >= 0, got {weight_decay_rate}")
        if clip_norm is not None and clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0 (0 or None: no clipping), got {clip_norm}")
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.clip_norm = None if not clip_norm else float(clip_norm)
        if schedule_step_offset not in (0, 1):
            raise ValueError(f"schedule_step_offset must be 0 or 1, got {schedule_step_offset}")
        self.schedule_step_offset = int(schedule_step_offset)
        self._decay_exclusions = tuple(exclude_from_weight_decay or ())
        self._excluded_variable_keys = set()

    # -------------------------------------------------------------- which variables
    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Adds variables (`var_list`) or name patterns (`var_names`, re.search on the
        TF1 name) to the weight-decay exclusions; only before the optimizer is built."""
        if self.built:
            raise ValueError("exclude_from_weight_decay() must be called before the "
                             "optimizer is built")
        self._decay_exclusions += tuple(var_names or ())
        self._excluded_variable_keys |= {self._var_key(v) for v in var_list or ()}

    def uses_weight_decay(self, variable) -> bool:
        """Whether `variable` (a model variable, or its TF1 name) gets weight decay."""
        if not self.weight_decay_rate:
            return False
        if not isinstance(variable, str) and self._var_key(variable) in \
                self._excluded_variable_keys:
            return False
        name = variable if isinstance(variable, str) else _variable_name(variable)
        return not any(re.search(p, name) for p in self._decay_exclusions)

    def uses_layer_adaptation(self, variable) -> bool:
        """Whether `variable` (or its TF1 name) gets LAMB's trust ratio."""
        return False

    # ------------------------------------------------------------------------ state
    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, [ADAM_M, ADAM_V])
        # Decided once, on the model variables: inside a tf.distribute update the
        # variable handed to update_step is a per-device copy without the Keras path.
        self._decay_flags = [self.uses_weight_decay(v) for v in var_list]
        self._adaptation_flags = [self.uses_layer_adaptation(v) for v in var_list]

    def tf1_variables(self, model=None) -> dict[str, object]:
        """The optimizer state under its names in the original TF1 checkpoints:
        `<variable name>/adam_m`, `<variable name>/adam_v` and `global_step` (the
        optimizer's `iterations`). `albert_tf.checkpoints` reads and writes what this
        returns, so the checkpoint code needs no knowledge of the optimizer.

        An unbuilt optimizer is built on `model.trainable_variables`; with `model`,
        every trainable variable of the model must be one the optimizer updates.
        """
        if not self.built:
            if model is None:
                raise ValueError(f"{self.name} is not built: pass model= or call "
                                 "optimizer.build(model.trainable_variables) first")
            self.build(model.trainable_variables)
        if model is not None:
            known = set(self._trainable_variables_indices)
            foreign = [_variable_name(v) for v in model.trainable_variables
                       if self._var_key(v) not in known]
            if foreign:
                raise ValueError(
                    f"{self.name} was built on other variables than {model.name}'s; it "
                    f"does not update {len(foreign)} of them, e.g. {foreign[:3]}")
        if self.gradient_accumulation_steps:
            raise ValueError("global_step has no single counter under Keras's "
                             "gradient_accumulation_steps")
        variables = self.tf1_slots()
        variables["global_step"] = self.iterations
        return variables

    def tf1_slots(self) -> dict[str, object]:
        """{`<TF1 name>/adam_m` and `/adam_v`: slot variable} for every built variable."""
        if not self.built:
            raise ValueError(f"{self.name} is not built yet: call "
                             "optimizer.build(model.trainable_variables) first")
        slots = {}
        for variable, m, v in zip(self._trainable_variables, self._adam_m, self._adam_v):
            if m is None:  # overwrite_with_gradient variables have no slots
                continue
            name = _variable_name(variable)
            slots[f"{name}/{ADAM_M}"] = m
            slots[f"{name}/{ADAM_V}"] = v
        return slots

    # ------------------------------------------------------------------------ update
    def _get_current_learning_rate(self):
        if isinstance(self._learning_rate,
                      keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self._iterations + self.schedule_step_offset)
        return super()._get_current_learning_rate()

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Keras's TF optimizer sums the replicas' gradients here, just before the
        # per-variable updates: clip the sum, as the original clips its global batch's
        # gradient.
        grads_and_vars, sliced = _densified_across_workers(list(grads_and_vars),
                                                           bool(self.clip_norm))
        grads_and_vars = super()._all_reduce_sum_gradients(grads_and_vars)
        if not self.clip_norm:
            return grads_and_vars
        grads = [g for g, _ in grads_and_vars]
        if sliced is None:
            clipped, _ = tf.clip_by_global_norm(grads, clip_norm=self.clip_norm)
        else:  # tf.clip_by_global_norm's arithmetic, with the slices' own norm
            squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g, was_sliced
                       in zip(grads, sliced.flags) if g is not None and not was_sliced]
            norm = tf.sqrt(tf.add_n(squares + [sliced.squares]))
            scale = self.clip_norm / tf.maximum(norm, self.clip_norm)
            clipped = [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]
        return [(g, v) for g, (_, v) in zip(clipped, grads_and_vars)]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._adam_m[index], self._adam_v[index]
        dtype = variable.dtype
        # One XLA kernel for the whole element-wise update (fused.compiled): ~10 passes
        # over each variable's memory in TensorFlow ops, one here.
        update = fused.compiled(
            _adam_update, fused.xla_enabled(), beta_1=self.beta_1, beta_2=self.beta_2,
            epsilon=self.epsilon,
            weight_decay_rate=self.weight_decay_rate if self._decay_flags[index] else 0.0,
            layer_adaptation=self._adaptation_flags[index])
        new_param, next_m, next_v = update(
            tf.cast(tf.convert_to_tensor(gradient), dtype), tf.convert_to_tensor(variable),
            tf.convert_to_tensor(m), tf.convert_to_tensor(v), tf.cast(learning_rate, dtype))
        self.assign(variable, new_param)
        self.assign(m, next_m)
        self.assign(v, next_v)

    def get_config(self):
        config = super().get_config()
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self._decay_exclusions),
            "clip_norm": self.clip_norm,
            "schedule_step_offset": self.schedule_step_offset,
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_OriginalAdamFamily):
    """The original `AdamWeightDecayOptimizer`: Adam without bias correction plus
    decoupled weight decay (see the module docstring); `clip_norm` clips the global
    gradient norm as the original's `create_optimizer` does."""


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(_OriginalAdamFamily):
    """The original `LAMBOptimizer`: `AdamWeightDecay`'s update scaled per variable by
    ||w|| / ||update||, except for the names matching `exclude_from_layer_adaptation`
    (default: `exclude_from_weight_decay`, as in the original)."""

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.0,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = None,
                 exclude_from_layer_adaptation: Sequence[str] | None = None,
                 clip_norm: float | None = None, schedule_step_offset: int = 1,
                 name: str | None = None, **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, clip_norm, schedule_step_offset,
                         name, **kwargs)
        # The original falls back to the weight-decay list when this one is empty.
        self._adaptation_exclusions = tuple(
            exclude_from_layer_adaptation or exclude_from_weight_decay or ())

    def uses_layer_adaptation(self, variable) -> bool:
        name = variable if isinstance(variable, str) else _variable_name(variable)
        return not any(re.search(p, name) for p in self._adaptation_exclusions)

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self._adaptation_exclusions)
        return config


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer: str = "adamw", weight_decay_rate: float = 0.01,
                     start_warmup_step: int = 0, poly_power: float = 1.0,
                     clip_norm: float | None = 1.0, **kwargs):
    """The optimizer of the original `optimization.create_optimizer`: AdamW or LAMB with
    beta_1 0.9, beta_2 0.999, epsilon 1e-6, weight decay except LayerNorm/layer_norm/bias,
    the `WarmupPolynomialDecay` schedule and global-norm clipping at `clip_norm`.

    Create it (and build it on the model's variables) inside the strategy's scope.
    `kwargs` go to the optimizer (e.g. `name`).
    """
    name = str(optimizer).lower()
    if name not in OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps,
                                     start_warmup_step=start_warmup_step,
                                     poly_power=poly_power)
    cls = Lamb if name == "lamb" else AdamWeightDecay
    return cls(learning_rate=schedule, weight_decay_rate=weight_decay_rate, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6,
               exclude_from_weight_decay=list(DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY),
               clip_norm=clip_norm, **kwargs)


def _unwrap(optimizer):
    inner = optimizer
    while hasattr(inner, "inner_optimizer"):  # keras.optimizers.LossScaleOptimizer
        inner = inner.inner_optimizer
    if not isinstance(inner, _OriginalAdamFamily):
        raise TypeError(
            "TF1 optimizer state (adam_m / adam_v) maps onto AdamWeightDecay or Lamb, "
            f"not {type(inner).__name__}")
    return inner


def tf1_optimizer_variables(optimizer, model=None) -> dict[str, object]:
    """`optimizer.tf1_variables(model)` of an AdamWeightDecay or Lamb, also when it is
    wrapped (`keras.optimizers.LossScaleOptimizer`)."""
    return _unwrap(optimizer).tf1_variables(model)
