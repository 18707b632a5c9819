"""Training objectives written so that any split of a batch gives the same loss.

A loss here is a sum of terms `numerator / denominator`: numerators are sums over the
examples of the batch (they depend on the model), denominators are counts computed from
the features alone (examples, masked-token weights). The training loop adds the
denominators up over every replica and micro-batch *before* dividing, so a global batch
split over 8 GPUs, or accumulated over 4 micro-batches, gives exactly the loss and the
gradient of the same batch on one device, weighted means (the masked-LM loss) included.
"""

from __future__ import annotations

from typing import Callable, Mapping

import tensorflow as tf

from albert_tf import losses, names


class Objective:
    """Base: `numerators(outputs, features)` and `denominators(features)`, both dicts of
    float32 scalars with the same keys; `offsets` are added to the global denominators
    (the original's 1e-5 of the masked-LM loss)."""

    offsets: Mapping[str, float] = {}
    term_names: tuple[str, ...] = ()

    def numerators(self, outputs, features) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def denominators(self, features) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def trainable_layers(self) -> dict:
        """Layers of the objective's own (by name) whose weights train with the model's
        and are checkpointed beside them (a distillation's projection); none here."""
        return {}

    def terms(self, outputs, features, denominators=None) -> dict[str, tf.Tensor]:
        """Each term's value (`numerator / denominator`); `denominators` default to
        this batch's own (plus offsets)."""
        if denominators is None:
            denominators = self.global_denominators([self.denominators(features)])
        numerators = self.numerators(outputs, features)
        return {k: numerators[k] / denominators[k] for k in numerators}

    def loss(self, outputs, features, denominators=None) -> tf.Tensor:
        return tf.add_n(list(self.terms(outputs, features, denominators).values()))

    def global_denominators(self, parts, all_reduce=None) -> dict[str, tf.Tensor]:
        """Adds up the denominators of several micro-batches (and, with `all_reduce`,
        of every replica), then the offsets."""
        total = {k: tf.add_n([p[k] for p in parts]) for k in parts[0]}
        if all_reduce is not None:
            total = all_reduce(total)
        return {k: v + self.offsets.get(k, 0.0) for k, v in total.items()}


def _batch_size(features) -> tf.Tensor:
    first = next(iter(features.values()))
    return tf.cast(tf.shape(first)[0], tf.float32)


class MeanObjective(Objective):
    """The mean over the examples of a per-example loss ([B] float)."""

    def __init__(self, per_example_loss: Callable, name: str = "loss"):
        self.per_example_loss = per_example_loss
        self.name = name
        self.term_names = (name,)

    def numerators(self, outputs, features):
        return {self.name: tf.reduce_sum(tf.cast(
            self.per_example_loss(outputs, features), tf.float32))}

    def denominators(self, features):
        return {self.name: _batch_size(features)}


def example_weights(features, weight: str) -> tf.Tensor:
    """The float feature `weight` of a batch's examples, float32 [B]."""
    return tf.cast(tf.reshape(features[weight], [-1]), tf.float32)


class WeightedMeanObjective(MeanObjective):
    """The mean over the examples of a per-example loss ([B] float), each weighted by
    the float feature `weight`: sum(weight * loss) / sum(weight) (the weights of the
    whole global batch in the denominator)."""

    def __init__(self, per_example_loss: Callable, weight: str, name: str = "loss"):
        super().__init__(per_example_loss, name)
        self.weight = weight

    def numerators(self, outputs, features):
        return {self.name: tf.reduce_sum(example_weights(features, self.weight) * tf.cast(
            self.per_example_loss(outputs, features), tf.float32))}

    def denominators(self, features):
        return {self.name: tf.reduce_sum(example_weights(features, self.weight))}


class PretrainingObjective(Objective):
    """The original `run_pretraining.py` loss (`losses.pretraining_loss`): masked LM
    (weighted mean with the 1e-5 denominator) plus sentence order (mean), its sums
    taken apart so that replicas and micro-batches add up before the division."""

    offsets = {"masked_lm_loss": losses.MLM_DENOMINATOR_EPSILON}
    term_names = ("masked_lm_loss", "sentence_order_loss")

    def numerators(self, outputs, features):
        mlm, _ = losses.masked_lm_sums(losses.log_probabilities(outputs[names.MLM_LOGITS]),
                                       features[names.MASKED_LM_IDS],
                                       features[names.MASKED_LM_WEIGHTS])
        sop = losses.sentence_order_nll(losses.log_probabilities(outputs[names.SOP_LOGITS]),
                                        features[names.NEXT_SENTENCE_LABELS])
        return {"masked_lm_loss": mlm, "sentence_order_loss": tf.reduce_sum(sop)}

    def denominators(self, features):
        weights = tf.cast(features[names.MASKED_LM_WEIGHTS], tf.float32)
        return {"masked_lm_loss": tf.reduce_sum(weights),
                "sentence_order_loss": _batch_size(features)}


class TokenObjective(Objective):
    """Token classification (`losses.token_classification_loss`): the mean of the
    per-position loss over the labelled positions of the global batch, its sums taken
    apart so that replicas and micro-batches add up before the division. A global batch
    with no labelled position has loss 0 (its count is taken as at least 1, as there)."""

    term_names = ("loss",)

    def numerators(self, outputs, features):
        sums, _ = losses.token_classification_sums(outputs[names.LOGITS],
                                                   features[names.LABEL_IDS])
        return {"loss": tf.reduce_sum(sums)}

    def denominators(self, features):
        labelled = tf.cast(features[names.LABEL_IDS], tf.int32) >= 0
        return {"loss": tf.reduce_sum(tf.cast(labelled, tf.float32))}

    def global_denominators(self, parts, all_reduce=None):
        total = super().global_denominators(parts, all_reduce)
        return {k: tf.maximum(v, 1.0) for k, v in total.items()}
