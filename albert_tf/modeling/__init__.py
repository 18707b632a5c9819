"""Keras layers and models of ALBERT, with variable paths that mirror the TF1 scopes."""

from albert_tf.modeling.base import tf1_scope
from albert_tf.modeling.common import random_draws
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.real_tokens import real_tokens_only
from albert_tf.modeling.tasks import (
    AlbertClassifier,
    AlbertMultipleChoice,
    AlbertSquadV1,
    AlbertSquadV2,
    AlbertTaskModel,
    AlbertTokenClassifier,
)

__all__ = ["AlbertClassifier", "AlbertEncoder", "AlbertMultipleChoice",
           "AlbertPretrainer", "AlbertSquadV1", "AlbertSquadV2", "AlbertTaskModel",
           "AlbertTokenClassifier", "random_draws", "real_tokens_only", "tf1_scope"]
