"""`attention_1`: multi-head self-attention of one ALBERT block."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import common

# The original adds (1 - mask) * -10000 to the attention logits of padded keys.
MASK_ADDER = -10000.0


def attention_bias(input_mask, dtype=tf.float32):
    """[B, T] mask of 1 (attend) / 0 (padding) -> [B, 1, 1, T] additive bias."""
    mask = tf.cast(input_mask, dtype)
    return ((1.0 - mask) * MASK_ADDER)[:, tf.newaxis, tf.newaxis, :]


class AlbertAttention(keras.layers.Layer):
    """`attention_1/self/{query,key,value}` and `attention_1/output/dense`.

    Kernels keep the original 2-D shape [H, N * D]; heads are split by reshaping.
    """

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "attention_1")
        super().__init__(**kwargs)
        self.config = config
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

    def call(self, x, input_mask, training=None, first_token_only=False):
        # x: [B, S, H]; input_mask: [B, S] int32, 1 for real tokens and 0 for padding.
        # (Keras casts float arguments to the compute dtype: the mask stays int until
        # here so that the -10000 bias is exact whatever the precision.)
        # first_token_only: queries (and the output) for position 0 alone, [B, 1, H],
        # attending over every key: what the pooled output needs of the last block.
        c = self.config
        batch_size, seq_length = tf.shape(x)[0], tf.shape(x)[1]
        queries = x[:, :1] if first_token_only else x
        query_length = 1 if first_token_only else seq_length
        heads, size = c.num_attention_heads, c.attention_head_size

        def split_heads(t, length):  # [B, length, H] -> [B, N, length, D]
            return tf.transpose(tf.reshape(t, [batch_size, length, heads, size]), [0, 2, 1, 3])

        q = split_heads(self.query(queries), query_length)  # [B, N, F, D]
        k = split_heads(self.key(x), seq_length)  # [B, N, T, D]
        v = split_heads(self.value(x), seq_length)  # [B, N, T, D]
        # Batched matmuls over [B, N] (oneDNN runs them faster than the equivalent
        # einsums on CPU; XLA sees the same dots).
        logits = tf.matmul(q, k, transpose_b=True)  # [B, N, F, T]
        # Softmax in float32 so that half-precision compute keeps the -10000 mask exact.
        logits = tf.cast(logits, tf.float32) * (1.0 / math.sqrt(size))
        probs = tf.nn.softmax(logits + attention_bias(input_mask))  # [B, N, F, T]
        probs = tf.cast(probs, x.dtype)
        probs = common.apply_dropout(self.probs_dropout, probs, training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, F, N, D]
        context = tf.reshape(context, [batch_size, query_length, c.hidden_size])  # [B, F, H]
        output = self.output_dense(context)
        return common.apply_dropout(self.output_dropout, output, training)
