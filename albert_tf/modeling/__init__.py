"""Keras layers and models of ALBERT, with variable paths that mirror the TF1 scopes: the
encoder, the pretrainer and what the task models share (`AlbertTaskModel`). The task
models live with their tasks (`albert_tf.tasks`); `albert_tf.AlbertClassifier` and the
others are importable from the package."""

from albert_tf.modeling.base import ExtraInput, tf1_scope
from albert_tf.modeling.common import random_draws
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.real_tokens import real_tokens_only
from albert_tf.modeling.task_model import AlbertTaskModel

__all__ = ["AlbertEncoder", "AlbertPretrainer", "AlbertTaskModel", "ExtraInput", "random_draws",
           "real_tokens_only", "tf1_scope"]
