"""`AlbertTaskModel`: an `AlbertEncoder` plus a task head, what the task models share.

The models of the fine-tuning tasks live with their tasks (`albert_tf.tasks`: the
classifier, the multiple-choice scorer, SQuAD v1.1 and v2.0, token classification); a
task file of your own puts its model on the same base. A head's variables are created
under the names the original graph gives them, from its `albert_tf.task_heads.Head`
(`_build_head`), so a pretraining checkpoint loads the encoder (the head is then
reported missing, as it should be) and a checkpoint fine-tuned by the original scripts
loads whole. Losses: `albert_tf.losses`.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf import names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common
from albert_tf.modeling.base import AlbertModel
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.heads import HeadLayers

# The original's head dropout: `keep_prob=0.9` (classifier, hard-coded) and the
# `--dropout_prob` default of run_race.py and run_squad_v2.py.
HEAD_DROPOUT_RATE = 0.1


def check_count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_rate(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


class AlbertTaskModel(AlbertModel):
    """An `AlbertEncoder` plus a task head; what the task models share.

    The head's initial weights and dropout draw their seeds from `seed + 1`, after the
    encoder's (which uses `seed`), as `AlbertPretrainer` does.
    """

    release_strict = False  # `from_release`: a pretraining release has no task head

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        super().__init__(config, seed, **kwargs)
        self.encoder = AlbertEncoder(config, seed=seed, dtype=self.dtype_policy)
        self._head_seeds = common.SeedStream(None if seed is None else seed + 1)

    # Where True (a student learning its teacher's hidden states), the outputs add
    # `names.HIDDEN_STATES`: the output of each layer pass (the last of its inner
    # group), every position computed.
    hidden_states_output = False
    # The layer passes (0-based) whose attention scores the outputs add, in this order,
    # as `names.ATTENTION_SCORES` (`AlbertEncoder.attention_scores`); () for none.
    attention_layers_output: tuple[int, ...] = ()

    def _encode(self, inputs, training, first_token_only=False):
        if not (self.hidden_states_output or self.attention_layers_output):
            return self.encoder(inputs, training=training,
                                first_token_only=first_token_only)
        encoded = self.encoder(inputs, training=training)
        inner = self.config.inner_group_num
        extra = {}
        if self.hidden_states_output:
            extra[names.HIDDEN_STATES] = encoded["encoder_outputs"][inner - 1::inner]
        if self.attention_layers_output:
            extra[names.ATTENTION_SCORES] = self.encoder.attention_scores(
                encoded, self.attention_layers_output)
        # kept for `__call__` (not an attribute Keras tracks)
        object.__setattr__(self, "_layer_outputs", extra)
        return encoded

    def __call__(self, *args, **kwargs):
        outputs = super().__call__(*args, **kwargs)
        if self.hidden_states_output or self.attention_layers_output:
            outputs = {**outputs, **self._layer_outputs}
            object.__setattr__(self, "_layer_outputs", None)
        return outputs

    def head_layers(self, head: task_heads.Head, num_outputs: int,
                     dropout_rate: float = 0.0) -> HeadLayers:
        """The layers of `head` (`HeadLayers`), their seeds drawn from the head's
        stream; `build()` them once assigned."""
        return HeadLayers(head, self.config, num_outputs, self._head_seeds,
                          self.dtype_policy, dropout_rate=dropout_rate)

    def _build_head(self, head: task_heads.Head, num_outputs: int,
                    dropout_rate: float = 0.0) -> None:
        """A head of weights and bias (the classifier's, the RACE scorer's, SQuAD
        v1.1's, token classification's): `self.output_weights` [num_outputs, H] and
        `self.output_bias` under their TF1 names, and `self.dropout` (None without a
        `Dropout` part or at rate 0), as the head's parts say."""
        layers = self.head_layers(head, num_outputs, dropout_rate)
        self.output_weights, self.output_bias = layers.build().values()
        dropouts = [p.scope for p in head.parts if isinstance(p, task_heads.Dropout)]
        self.dropout = layers[dropouts[0]] if dropouts else None

    def _score_pooled(self, pooled, training):
        """dropout(pooled) @ output_weights^T + output_bias: [N, H] -> [N, num_outputs]."""
        pooled = common.apply_dropout(self.dropout, pooled, training)
        scores = tf.matmul(pooled, tf.cast(self.output_weights, pooled.dtype), transpose_b=True)
        return scores + tf.cast(self.output_bias, pooled.dtype)


def choice_outputs(logits) -> dict:
    """`logits`, their softmax `probabilities` and the argmax `predictions` (int32)."""
    probabilities = tf.nn.softmax(logits, axis=-1)
    return {names.LOGITS: logits, names.PROBABILITIES: probabilities,
            names.PREDICTIONS: tf.argmax(probabilities, axis=-1, output_type=tf.int32)}
