"""Keras layers and models of ALBERT, with variable paths that mirror the TF1 scopes."""

from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer

__all__ = ["AlbertEncoder", "AlbertPretrainer"]
