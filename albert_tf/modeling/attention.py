"""`attention_1`: multi-head self-attention of one ALBERT block."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import common, real_tokens, recompute

# The original adds (1 - mask) * -10000 to the attention logits of padded keys.
MASK_ADDER = -10000.0


def attention_bias(input_mask, dtype=tf.float32):
    """[B, T] mask of 1 (attend) / 0 (padding) -> [B, 1, 1, T] additive bias."""
    mask = tf.cast(input_mask, dtype)
    # (expand_dims, not [:, None, None, :]: LiteRT has no kernel for a StridedSlice
    # that adds axes)
    return tf.expand_dims(tf.expand_dims((1.0 - mask) * MASK_ADDER, 1), 1)


def split_heads(projected, batch_size, length, heads: int, size: int):
    """[B, L, k * N * D] -> [k, B, N, L, D], for k projections side by side (query, key
    and value)."""
    count = projected.shape[-1] // (heads * size)
    out = tf.reshape(projected, [batch_size, length, count, heads, size])
    return tf.transpose(out, [2, 0, 3, 1, 4])


def scaled_scores(q, k, size: int):
    """Each head's q . k / sqrt(D), in float32 (so that half-precision compute keeps the
    -10000 mask added after it exact): [B, N, F, D] x [B, N, S, D] -> [B, N, F, S]."""
    return tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * (1.0 / math.sqrt(size))


class AlbertAttention(common.AlbertLayer):
    """`attention_1/self/{query,key,value}` and `attention_1/output/dense`.

    Kernels keep the original 2-D shape [H, N * D]; heads are split by reshaping.
    """

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "attention_1")
        super().__init__(config, seeds, **kwargs)
        hidden, stddev = config.hidden_size, config.initializer_range

        def make(name):
            return common.dense(hidden, name=name, stddev=stddev, seeds=seeds,
                                dtype=self.dtype_policy)

        self.query, self.key, self.value = make("query"), make("key"), make("value")
        self.output_dense = make("dense")
        self.probs_dropout = common.dropout(
            config.attention_probs_dropout_prob, seeds, self.dtype_policy, "probs_dropout")
        self.output_dropout = common.dropout(
            config.hidden_dropout_prob, seeds, self.dtype_policy, "output_dropout")

    def build(self, input_shape=None):
        shape = (None, None, self.config.hidden_size)
        with keras.name_scope("self"):
            for layer in (self.query, self.key, self.value):
                layer.build(shape)
        with keras.name_scope("output"):
            self.output_dense.build(shape)

    def shared_weights(self, training=False) -> dict[str, common.SharedDense]:
        """{"qkv": query, key and value side by side, "output": the output dense}, read
        once per forward pass for every layer that runs this attention."""
        dtype = self.compute_dtype
        return {"qkv": common.SharedDense.of([self.query, self.key, self.value], dtype,
                                             training),
                "output": common.SharedDense.of([self.output_dense], dtype, training)}

    def scores(self, x):
        """The attention scores of x [B, S, H] (`scaled_scores`, [B, N, S, S]), before
        the padding's bias and the softmax, from the weights `call` reads."""
        c = self.config
        qk = self.shared_weights()["qkv"].columns(0, 2 * c.hidden_size)(x)
        shape = tf.shape(x)
        q, k = tf.unstack(split_heads(qk, shape[0], shape[1], c.num_attention_heads,
                                      c.attention_head_size))
        return scaled_scores(q, k, c.attention_head_size)

    def call(self, x, input_mask, training=None, first_token_only=False, weights=None,
             residual=None, tokens=None):
        """The attention output [B, F, H] (F = S, or 1 with `first_token_only`), plus
        `residual` [B, F, H] if given (the block's, before its LayerNorm).
        `weights`: `shared_weights()`, if made. With `tokens` (`real_tokens.RealTokens`)
        x is the real tokens' [T, H], and so are the output and residual unless
        `first_token_only`."""
        weights = weights or self.shared_weights(training)
        context = self.context(x, input_mask, training, first_token_only, weights["qkv"],
                               tokens)
        return common.dense_output(weights["output"], context, residual,
                                   self.output_dropout, training)

    def context(self, x, input_mask, training, first_token_only, qkv, tokens=None):
        """The heads' context [B, F, H], before the output dense.

        x: [B, S, H]; input_mask: [B, S] int32, 1 for real tokens and 0 for padding.
        (Keras casts float arguments to the compute dtype: the mask stays int until
        here so that the -10000 bias is exact whatever the precision.)
        first_token_only: queries (and the output) for position 0 alone, [B, 1, H],
        attending over every key: what the pooled output needs of the last block.
        qkv: the query, key and value weights side by side (`shared_weights()["qkv"]`).
        tokens: x is the real tokens' [T, H] (`real_tokens.RealTokens`): they are
        projected as they are and spread to [B, S] for the attention; the context is
        then [T, H] too, unless `first_token_only`.
        """
        c = self.config
        if tokens is None:
            batch_size, seq_length = tf.shape(x)[0], tf.shape(x)[1]
            spread = lambda t: t  # noqa: E731
        else:
            batch_size, seq_length = tokens.batch_size, tokens.seq_length
            spread = tokens.scatter
        heads, size, hidden = c.num_attention_heads, c.attention_head_size, c.hidden_size

        def split(projected, length):
            return split_heads(projected, batch_size, length, heads, size)

        if first_token_only:
            first = real_tokens.first_positions(x, tokens)  # [B, 1, H]
            q = split(qkv.columns(0, hidden)(first), 1)[0]  # [B, N, 1, D]
            k, v = tf.unstack(split(spread(qkv.columns(hidden, 3 * hidden)(x)),
                                    seq_length))  # [B, N, S, D]
            query_length = 1
        else:
            q, k, v = tf.unstack(split(spread(qkv(x)), seq_length))  # [B, N, S, D] each
            query_length = seq_length
        # Batched matmuls over [B, N] (oneDNN runs them faster than the equivalent
        # einsums on CPU; XLA sees the same dots).
        bias = attention_bias(input_mask)
        dropout = self.probs_dropout
        seed = common.draw_seed(dropout, training)

        def heads_context(q, k, v):
            logits = scaled_scores(q, k, size)  # [B, N, F, S], float32 for the softmax
            probs = tf.cast(tf.nn.softmax(logits + bias), x.dtype)  # [B, N, F, S]
            probs = (common.apply_dropout(dropout, probs, training) if seed is None
                     else dropout.with_seed(probs, seed))
            return tf.matmul(probs, v)  # [B, N, F, D]

        if (common.training_now(training) and not recompute.inside_recomputed()
                and (dropout is None or seed is not None)):
            # Training: the probabilities are computed again in the backward pass
            # instead of kept, from q and k, with the same dropout mask
            # (`modeling.recompute`).
            heads = recompute.recomputed(heads_context, q, [k, v])
        else:
            heads = heads_context(q, k, v)
        context = tf.transpose(heads, [0, 2, 1, 3])  # [B, F, N, D]
        context = tf.reshape(context, [batch_size, query_length, hidden])  # [B, F, H]
        return context if tokens is None or first_token_only else tokens.gather(context)
