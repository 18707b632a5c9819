"""`bert/embeddings`: ALBERT's factorized embeddings of width E."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import common


class AlbertEmbeddings(common.AlbertLayer):
    """Word + token-type + position embeddings (all [*, E]), LayerNorm, dropout.

    Variables: `word_embeddings` [vocab_size, E], `token_type_embeddings`
    [type_vocab_size, E], `position_embeddings` [max_position_embeddings, E],
    `LayerNorm/gamma|beta` [E].
    """

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "embeddings")
        super().__init__(config, seeds, **kwargs)
        stddev = config.initializer_range
        self._initializers = {
            name: common.truncated_normal(stddev, seeds)
            for name in ("word_embeddings", "token_type_embeddings", "position_embeddings")
        }
        self.layer_norm = common.layer_norm("LayerNorm", self.dtype_policy)
        self.dropout = common.dropout(config.hidden_dropout_prob, seeds, self.dtype_policy)

    def build(self, input_shape=None):
        c = self.config
        shapes = {
            "word_embeddings": (c.vocab_size, c.embedding_size),
            "token_type_embeddings": (c.type_vocab_size, c.embedding_size),
            "position_embeddings": (c.max_position_embeddings, c.embedding_size),
        }
        for name, shape in shapes.items():
            setattr(self, name, self.add_weight(
                name=name, shape=shape, initializer=self._initializers[name]))
        self.layer_norm.build((None, None, c.embedding_size))

    def call(self, input_word_ids, input_type_ids, training=None, tokens=None):
        # input_word_ids, input_type_ids: [B, S] int32 -> [B, S, E]; with `tokens`
        # (`real_tokens.RealTokens`), the real tokens' embeddings alone, [T, E].
        seq_length = input_word_ids.shape[1]
        if seq_length is not None and seq_length > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence length {seq_length} is longer than the model's "
                f"max_position_embeddings ({self.config.max_position_embeddings})")
        if tokens is not None:
            x = tf.gather(self.word_embeddings, tokens.gather(input_word_ids))  # [T, E]
            x += tf.gather(self.token_type_embeddings, tokens.gather(input_type_ids))
            x += tf.gather(self.position_embeddings, tokens.positions)
        else:
            if seq_length is None:
                seq_length = tf.shape(input_word_ids)[1]
            x = tf.gather(self.word_embeddings, input_word_ids)  # [B, S, E]
            x += tf.gather(self.token_type_embeddings, input_type_ids)
            x += self.position_embeddings[:seq_length][tf.newaxis]  # [1, S, E]
        x = self.layer_norm(x)
        return common.apply_dropout(self.dropout, x, training)
