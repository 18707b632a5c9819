"""Inference on the real tokens of a batch only: no work on padding.

A batch [B, S] padded to its longest sequence (or to max_seq_length, as records and many
clients send it) holds T = sum(input_mask) real tokens. Nearly all of ALBERT's work is per
token: the embeddings, the Q/K/V and output projections, the FFN and the LayerNorms, 24 H^2
FLOPs per token and layer against 4 S H for the attention scores and their weighted sum
(S / 6H: 2.7% for ALBERT-base at S = 128). Within `real_tokens_only()`, the encoder
gathers the real tokens into one [T, ·] matrix, runs the per-token layers on it, and
spreads the projected keys, values and queries to [B, S, ·] only for the attention
itself (whose bias excludes padded keys as before). The outputs at real positions are
those of the padded computation (to float rounding: the same matmuls on fewer rows);
`sequence_output` holds zeros at padded positions, where the padded computation holds
values that no head or metric reads.

Training is unchanged (its dropout masks are drawn over [B, S, ·]): the context acts on
forward passes with `training` false, traced inside it. The SavedModel signatures and the
scripts' evaluation and prediction are traced inside `inference_graph()`, which adds plain
TensorFlow ops for GELU and LayerNorm (`albert_tf.modeling.fused`).
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from albert_tf.modeling import fused

_ENABLED = fused.TracingSwitch(default=False)


def real_tokens_only(enabled: bool = True):
    """Inside this block, inference forward passes traced compute on real tokens only."""
    return _ENABLED.set(enabled)


def enabled_now() -> bool:
    return _ENABLED.now()


@contextlib.contextmanager
def inference_graph():
    """How inference graphs are traced (the SavedModel signatures, the scripts'
    evaluation and prediction): on real tokens only, and with GELU and LayerNorm as
    plain TensorFlow ops instead of XLA kernels (`fused.xla_disabled`). An XLA kernel is
    compiled for each input shape, and T changes with nearly every batch (compiling
    costs about 0.1 s, the forward pass of a batch a few ms on a small model); TF
    Serving also runs XLA kernels on CPU only when started with
    --xla_cpu_compilation_enabled. Nothing differentiates them: GELU and LayerNorm
    are traced without their gradient functions (`fused.without_gradients`)."""
    with fused.xla_disabled(), fused.without_gradients(), real_tokens_only():
        yield


class RealTokens:
    """Where the real tokens of a [B, S] batch are: `flat` [T] indices into the B * S
    positions, in order (sequence by sequence, position by position), and `slots`
    [B, S], each position's row among the T tokens (T, a row of zeros, where padded)."""

    def __init__(self, input_mask):
        shape = tf.shape(input_mask)
        self.batch_size, self.seq_length = shape[0], shape[1]
        is_real = input_mask > 0
        self.flat = tf.cast(tf.where(tf.reshape(is_real, [-1]))[:, 0], tf.int32)
        self.positions = self.flat % self.seq_length  # [T]: each token's position
        # A gather from the tokens plus one zero row, not a ScatterNd into zeros: on CPU
        # ScatterNd took 0.65 ms for ALBERT-base's [T, 3H] queries, keys and values of a
        # request of 8 texts, this 0.14 ms.
        order = tf.cumsum(tf.reshape(tf.cast(is_real, tf.int32), [-1]))  # 1..T at real
        self.slots = tf.where(is_real, tf.reshape(order, shape) - 1, tf.size(self.flat))

    def gather(self, x):
        """[B, S, ...] -> [T, ...]."""
        return tf.gather(tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0)), self.flat)

    def scatter(self, x):
        """[T, ...] -> [B, S, ...], zeros at padded positions."""
        return self._spread(x, self.slots)

    def first(self, x):
        """[T, ...] -> [B, 1, ...]: each sequence's position 0 (zeros where padded)."""
        return self._spread(x, self.slots[:, :1])

    @staticmethod
    def _spread(x, slots):
        with_zeros = tf.pad(x, [[0, 1]] + [[0, 0]] * (x.shape.rank - 1))
        return tf.gather(with_zeros, slots)


def first_positions(x, tokens: RealTokens | None):
    """Each sequence's position 0, [B, 1, ...], of x [B, S, ...] or, with `tokens`, of
    the real tokens' x [T, ...]."""
    return x[:, :1] if tokens is None else tokens.first(x)
