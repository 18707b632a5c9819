"""The losses of the original code, in float32: pretraining (`run_pretraining.py`)
and fine-tuning (`run_classifier.py`, `run_race.py`, `run_squad_v1.py`, `run_squad_v2.py`)."""

from __future__ import annotations

import tensorflow as tf

from albert_tf import names

# The original divides the weighted MLM loss by sum(weights) + 1e-5.
MLM_DENOMINATOR_EPSILON = 1e-5


# ------------------------------------------------------------------ pretraining
# One definition of the masked-LM and sentence-order math, which the loss below, the
# training objective (`training.objectives.PretrainingObjective`, which sums over
# replicas before dividing) and the evaluation metrics (`tasks.pretraining`) share.


def log_probabilities(logits):
    """log_softmax over the last axis, in float32 (the original's first step)."""
    return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)


def masked_lm_nll(log_probs, masked_lm_ids):
    """-log p(masked token): log_probs [B, P, V], masked_lm_ids [B, P] -> [B, P]."""
    return -tf.gather(log_probs, tf.cast(masked_lm_ids, tf.int32), batch_dims=2)


def masked_lm_sums(log_probs, masked_lm_ids, masked_lm_weights):
    """(sum of weight * nll, sum of weights): the numerator and denominator of the
    masked-LM loss, before the original's 1e-5 (weights: [B, P], 0 on padding)."""
    weights = tf.cast(masked_lm_weights, tf.float32)
    nll = masked_lm_nll(log_probs, masked_lm_ids)  # [B, P]
    return tf.reduce_sum(weights * nll), tf.reduce_sum(weights)


def sentence_order_nll(log_probs, next_sentence_labels):
    """-log p(label): log_probs [B, 2], labels [B] or [B, 1] -> [B]."""
    return -tf.gather(log_probs, _flat(next_sentence_labels, tf.int32), batch_dims=1)


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    """Weighted mean negative log-likelihood of the masked tokens.

    mlm_logits: [B, P, V]; masked_lm_ids: [B, P]; masked_lm_weights: [B, P] (0 for the
    padding entries of `masked_lm_positions`).
    """
    total, weight = masked_lm_sums(log_probabilities(mlm_logits), masked_lm_ids,
                                   masked_lm_weights)
    return total / (weight + MLM_DENOMINATOR_EPSILON)


def sentence_order_loss(sop_logits, next_sentence_labels):
    """Mean negative log-likelihood of the sentence-order labels ([B] or [B, 1])."""
    return tf.reduce_mean(sentence_order_nll(log_probabilities(sop_logits),
                                             next_sentence_labels))


def pretraining_loss(outputs, features):
    """(total, mlm, sop) for the outputs of `AlbertPretrainer` and the batch's
    original feature names (`masked_lm_ids`, `masked_lm_weights`,
    `next_sentence_labels`)."""
    mlm = masked_lm_loss(outputs[names.MLM_LOGITS], features[names.MASKED_LM_IDS],
                         features[names.MASKED_LM_WEIGHTS])
    sop = sentence_order_loss(outputs[names.SOP_LOGITS], features[names.NEXT_SENTENCE_LABELS])
    return mlm + sop, mlm, sop


# ------------------------------------------------------------------ fine-tuning losses
# The losses of the original fine-tuning scripts, in float32. Each takes the model's
# outputs and the labels as the records hold them ([B] or [B, 1]). With
# `per_example=True` the per-example vector [B] is returned instead of its mean (the
# original's `per_example_loss`, which its evaluation averages with `is_real_example`).


def _flat(labels, dtype):
    return tf.reshape(tf.cast(labels, dtype), [-1])


def _nll_of_positions(log_probs, positions):
    """-sum(one_hot(positions) * log_probs): the original's form, so that a position
    outside [0, depth) contributes 0, as there."""
    depth = tf.shape(log_probs)[-1]
    one_hot = tf.one_hot(_flat(positions, tf.int32), depth=depth, dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)


def classification_loss(logits, labels, *, per_example: bool = False):
    """Cross-entropy of GLUE classification (`classifier_utils.create_model`) and of
    RACE (`race_utils.create_model`, logits [B, num_choices]): the mean over the batch
    of -log_softmax(logits)[label]. logits: [B, num_labels]; labels: int [B] or [B, 1]."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    loss = _nll_of_positions(log_probs, labels)
    return loss if per_example else tf.reduce_mean(loss)


def regression_loss(predictions, labels, *, per_example: bool = False):
    """STS-B (`num_labels == 1`): the mean squared error (prediction - label)^2.
    predictions: [B] (or [B, 1]); labels: float [B] or [B, 1]."""
    loss = tf.square(_flat(predictions, tf.float32) - _flat(labels, tf.float32))
    return loss if per_example else tf.reduce_mean(loss)


def squad_v1_loss(start_logits, end_logits, start_positions, end_positions, *,
                  per_example: bool = False):
    """`run_squad_v1.py`: (start + end) / 2, each the batch mean of
    -log_softmax(logits)[position] over the whole sequence (the original does not mask).
    start_logits, end_logits: [B, S]; positions: int [B] or [B, 1]."""
    start = _nll_of_positions(
        tf.nn.log_softmax(tf.cast(start_logits, tf.float32), axis=-1), start_positions)
    end = _nll_of_positions(
        tf.nn.log_softmax(tf.cast(end_logits, tf.float32), axis=-1), end_positions)
    loss = (start + end) / 2.0  # [B]; its batch mean is the original's loss
    return loss if per_example else tf.reduce_mean(loss)


def token_classification_sums(logits, label_ids):
    """(sum, count) per example: the sum of -log_softmax(logits)[label] over the
    labelled positions (`label_ids >= 0`: the first piece of each word; -1,
    `data.ner.IGNORE`, elsewhere) and their count, both float32 [B].
    logits: [B, S, num_labels]; label_ids: int [B, S]."""
    logits = tf.cast(logits, tf.float32)
    log_probs = tf.nn.log_softmax(tf.reshape(logits, [-1, tf.shape(logits)[-1]]), axis=-1)
    nll = tf.reshape(_nll_of_positions(log_probs, label_ids), tf.shape(label_ids))  # [B, S]
    weights = tf.cast(tf.cast(label_ids, tf.int32) >= 0, tf.float32)
    return tf.reduce_sum(nll * weights, -1), tf.reduce_sum(weights, -1)


def token_classification_loss(logits, label_ids, *, per_example: bool = False):
    """Token classification (NER): the mean of -log_softmax(logits)[label] over the
    labelled positions of the batch (Model Garden's and Hugging Face's loss), or per
    example with `per_example` ([B]; 0 for a row with no label); see
    `token_classification_sums`."""
    sums, counts = token_classification_sums(logits, label_ids)
    if per_example:
        return sums / tf.maximum(counts, 1.0)
    return tf.reduce_sum(sums) / tf.maximum(tf.reduce_sum(counts), 1.0)


# The original weighs the answerability loss by 0.5 "so that the scale is comparable".
SQUAD_V2_CLASS_LOSS_WEIGHT = 0.5


def squad_v2_loss(start_log_probs, end_log_probs, cls_logits, start_positions,
                  end_positions, is_impossible, *, per_example: bool = False):
    """`run_squad_v2.py`: (start + end) * 0.5 + 0.5 * answerability, where start and end
    are the batch means of -log_probs[position] (the p_mask-ed log-probabilities of
    `AlbertSquadV2` called with `start_positions`) and answerability is the mean sigmoid
    cross-entropy of `cls_logits` [B] against `is_impossible` (1 = no answer)."""
    start = _nll_of_positions(tf.cast(start_log_probs, tf.float32), start_positions)
    end = _nll_of_positions(tf.cast(end_log_probs, tf.float32), end_positions)
    answerability = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=_flat(is_impossible, tf.float32), logits=_flat(cls_logits, tf.float32))
    # [B]; its batch mean is the original's loss (every part is a batch mean there).
    loss = (start + end) * 0.5 + answerability * SQUAD_V2_CLASS_LOSS_WEIGHT
    return loss if per_example else tf.reduce_mean(loss)
