"""Recomputation: a training forward pass that keeps each layer's input alone, the layer
run again in the backward pass (`AlbertModel(..., recompute="layer")`, `--recompute`).

What a unit is (`UNITS`):
- "layer": each block (attention + feed-forward, the original's `inner_group_i`,
  transformers' `AlbertLayer`) is recomputed on its own;
- "group": each run of a layer group (its `inner_group_num` blocks in turn, transformers'
  `AlbertLayerGroup`) is recomputed as one: fewer tensors kept when `inner_group_num` > 1,
  a larger working set in the backward pass. With one block per group (every release)
  the two are the same.

Dropout masks replay exactly: each unit draws its masks in a `random_draws` frame of its
own, whose seed is drawn (`common.next_frame_seed`) before the unit runs and handed to
it, so the unit run again draws what it drew the first time. Units draw so with and
without recomputation, which therefore give the same gradients.

Without a unit too, a training pass recomputes each layer's attention probabilities
(`recomputed`, around the heads' softmax and context in `modeling.attention`): a layer
keeps its query, key and value, not its [B, N, S, S] softmax tensors, which at 512
tokens are much of what it would keep (ALBERT-xxlarge: 64 MB a sequence for the
probabilities), for one more query-key product and softmax per layer in the backward
pass. The probabilities' dropout mask replays as a unit's do: its seed is drawn before.
A layer inside a recomputed unit does not do it again (`inside_recomputed`): the unit's
replay keeps them for the one layer being differentiated.

A recomputed unit's replay stops before its last matmul: the unit keeps its input
before the LayerNorm that ends the block before it (`Deferred`), so that the block's
feed-forward output, which only that LayerNorm's gradient would read, is not computed
again (ALBERT-base at 512 tokens, batch 2: --recompute's step 1.36x the step without,
1.21x with this, timed side by side, `benchmarks/bench_memory.py --paired_rounds`).

The recomputation is a `tf.custom_gradient` like `tf.recompute_grad`, with two
differences that matter for ALBERT: the weights reach a unit as tensors (cast, and
transposed, once per forward pass for the layers that share them: `common.SharedDense`)
and only the unit's input is made to wait for the incoming gradient, so the backward
pass copies no weights (`tf.recompute_grad` adds a zero to every argument: for
ALBERT-xxlarge 0.8 GB of shared weights and 0.8 GB of their transposes, per layer).
"""

from __future__ import annotations

import contextlib
from typing import Callable

import tensorflow as tf
from tensorflow.python.eager import record  # what tf.recompute_grad uses

from albert_tf.modeling import common
from albert_tf.modeling.fused import TracingSwitch

UNITS = ("layer", "group")

# The unit of the models being traced (`AlbertModel.__call__` sets it from the model's
# `recompute`); None: nothing recomputed.
_UNIT = TracingSwitch(default=None)
# Whether what is being traced runs inside `recomputed` (its forward pass or its replay).
_INSIDE = TracingSwitch(default=False)


def check_unit(value, name: str = "recompute") -> str | None:
    """`value` as a unit of `UNITS`, or None for no recomputation (None, "" or "none")."""
    if value is None or value in ("", "none"):
        return None
    if value not in UNITS:
        raise ValueError(f"{name} must be one of {', '.join(UNITS)} or none, got {value!r}")
    return value


def inside_recomputed() -> bool:
    """Whether the ops being traced belong to a `recomputed` computation, which keeps
    nothing of its inside for the backward pass anyway."""
    return _INSIDE.now()


def unit_now() -> str | None:
    """The unit being traced (`with_unit`), or None."""
    return _UNIT.now()


def with_unit(unit: str | None):
    """Within this block, models traced for training recompute `unit` (None: nothing)."""
    return _UNIT.set(check_unit(unit))


@contextlib.contextmanager
def encoder_draws(has_dropout: bool, training):
    """Around an encoder's training pass that recomputes with dropout outside any
    `random_draws` block (a user's own loop): one frame whose seed is drawn once, from
    TensorFlow's global generator, so that a recomputed unit replays its masks. Elsewhere
    nothing."""
    if not (has_dropout and common.training_now(training) and unit_now()
            and not common.drawing()):
        yield
        return
    seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
    with common.random_draws(seed):
        yield


class Deferred:
    """`norm(value)`, not computed yet: the output of a recomputed block without its last
    LayerNorm (`AlbertBlock(..., defer_norm=True)`), the sum of its feed-forward half
    and residual. The unit after it keeps `value` as its input and applies `norm` first
    (`input_norm=`), so that the block's replay need not compute `value`: nothing in
    the block's backward pass reads it but that LayerNorm's gradient, and the replay
    stops before the block's last matmul (the output dense, a third of a block's matmul
    work), which Grappler prunes. The same tensors are kept (`value` instead of
    `norm(value)`). (A plain object, which Keras passes through as it is.)"""

    __slots__ = ("value", "norm")

    def __init__(self, value: tf.Tensor, norm: Callable):
        self.value, self.norm = value, norm

    def resolve(self):
        return self.norm(self.value)


def resolved(x):
    """x, or a `Deferred` x's `norm(value)`."""
    return x.resolve() if isinstance(x, Deferred) else x


def deferring(recompute: bool) -> bool:
    """Whether a recomputed unit defers its last LayerNorm (`Deferred`): inside graphs
    only, where the pruning lets it save work; an eager pass would compute and keep
    both the value and its norm."""
    return recompute and tf.inside_function()


def run_unit(fn, x, weights, *, recompute: bool):
    """`fn(x, weights, input_norm)` (one block or one group run: [B, S, H] in, a tensor
    or list of tensors out, any of them possibly `Deferred`; a `Deferred` x comes as
    its value and its norm, None otherwise) with its dropout masks drawn in a
    `random_draws` frame of its own, and, with `recompute`, kept for the backward pass
    as `x` alone (a `Deferred` x: its value). `weights` is a nest of
    tensors (the unit's `shared_weights()`; None leaves allowed); variables the unit
    reads itself (LayerNorm) get their gradients too. Called only in training passes."""
    seed = common.next_frame_seed()
    flat = tf.nest.flatten(weights)
    present = [i for i, t in enumerate(flat) if t is not None]
    norm = x.norm if isinstance(x, Deferred) else None
    # Once `fn` has run: whether it returned a list, and the `norm` of each output
    # (None: not deferred); `unit` returns the outputs' tensors as a list.
    returned = {}

    def unit(value, *tensors):
        leaves = list(flat)
        for i, tensor in zip(present, tensors):
            leaves[i] = tensor
        with common.random_draws(seed) if seed is not None else contextlib.nullcontext():
            outputs = fn(value, tf.nest.pack_sequence_as(weights, leaves), norm)
        returned["list"] = isinstance(outputs, list)
        items = outputs if returned["list"] else [outputs]
        returned["norms"] = [o.norm if isinstance(o, Deferred) else None for o in items]
        return [o.value if isinstance(o, Deferred) else o for o in items]

    tensors = [flat[i] for i in present]
    value = x if norm is None else x.value
    outputs = recomputed(unit, value, tensors) if recompute else unit(value, *tensors)
    items = [Deferred(o, n) if n is not None else o
             for o, n in zip(outputs, returned["norms"])]
    return items if returned["list"] else items[0]


def recomputed(unit, x, tensors):
    """unit(x, *tensors), whose backward pass runs it again from x instead of keeping
    what it computed (x and `tensors` are kept). Random draws inside `unit` must replay:
    seeds drawn before, not by the unit."""

    @tf.custom_gradient
    def forward(x, *tensors):
        # (nothing inside is kept for the outer tape)
        with record.stop_recording(), _INSIDE.set(True):
            outputs = unit(x, *tensors)
        # (shapes now, so that a zero gradient of an unread output keeps no output alive)
        shapes = [(tf.shape(o), o.dtype) for o in tf.nest.flatten(outputs)]

        def backward(*output_grads, variables=None):
            output_grads = [tf.zeros(shape, dtype) if g is None else g
                            for g, (shape, dtype) in zip(output_grads, shapes)]
            # The recomputation must wait for the gradient of its outputs (XLA ignores
            # control dependencies): x plus a zero computed from that of the last
            # output, which the next unit reads (the construction of
            # `tf.recompute_grad`, which no optimizer folds away). (An output that
            # nothing reads, a group's inner block's, gets zeros, from which Grappler
            # folds the sum to x and then merges the replay's first matmuls with the
            # forward pass's, whose outputs it keeps.)
            first = tf.cast(tf.reduce_max(tf.reshape(output_grads[-1], [-1])[:1]), tf.bool)
            zero = tf.where(tf.equal(first, first), 0.0, float("nan"))
            replayed_x = x + tf.cast(zero, x.dtype)
            sources = [replayed_x, *tensors, *(variables or [])]
            with tf.GradientTape() as tape, _INSIDE.set(True):
                tape.watch(sources)
                replayed = unit(replayed_x, *tensors)
            grads = tape.gradient(replayed, sources, output_gradients=output_grads)
            count = 1 + len(tensors)
            return grads[:count], grads[count:]

        return outputs, backward

    return forward(x, *tensors)
