"""The pretraining losses of the original `run_pretraining.py`, in float32."""

from __future__ import annotations

import tensorflow as tf

# The original divides the weighted MLM loss by sum(weights) + 1e-5.
MLM_DENOMINATOR_EPSILON = 1e-5


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    """Weighted mean negative log-likelihood of the masked tokens.

    mlm_logits: [B, P, V]; masked_lm_ids: [B, P]; masked_lm_weights: [B, P] (0 for the
    padding entries of `masked_lm_positions`).
    """
    log_probs = tf.nn.log_softmax(tf.cast(mlm_logits, tf.float32), axis=-1)
    ids = tf.cast(masked_lm_ids, tf.int32)
    nll = -tf.gather(log_probs, ids, batch_dims=2)  # [B, P]
    weights = tf.cast(masked_lm_weights, tf.float32)
    return tf.reduce_sum(weights * nll) / (tf.reduce_sum(weights) + MLM_DENOMINATOR_EPSILON)


def sentence_order_loss(sop_logits, next_sentence_labels):
    """Mean negative log-likelihood of the sentence-order labels ([B] or [B, 1])."""
    log_probs = tf.nn.log_softmax(tf.cast(sop_logits, tf.float32), axis=-1)  # [B, 2]
    labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
    return -tf.reduce_mean(tf.gather(log_probs, labels, batch_dims=1))


def pretraining_loss(outputs, features):
    """(total, mlm, sop) for the outputs of `AlbertPretrainer` and the batch's
    original feature names (`masked_lm_ids`, `masked_lm_weights`,
    `next_sentence_labels`)."""
    mlm = masked_lm_loss(outputs["mlm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"])
    sop = sentence_order_loss(outputs["sop_logits"], features["next_sentence_labels"])
    return mlm + sop, mlm, sop
