"""Models that take raw text, the keras-hub way: `TextPreprocessor` (a release's
tokenizer and a serving kind's packing, as a Keras layer) and the text models that hold
one (`AlbertTextClassifier`, `AlbertTextMultipleChoice`, `AlbertTextTokenClassifier`):
strings in `fit`, `evaluate`, `predict`, `.keras` files and exports. See
docs/keras-way.md."""

from albert_tf.text_models.models import (
    AlbertTextClassifier,
    AlbertTextModel,
    AlbertTextMultipleChoice,
    AlbertTextTokenClassifier,
    TaskLoss,
    TokenAccuracy,
)
from albert_tf.text_models.preprocessing import TextInputError, TextPreprocessor

__all__ = ["AlbertTextClassifier", "AlbertTextModel", "AlbertTextMultipleChoice",
           "AlbertTextTokenClassifier", "TaskLoss", "TextInputError", "TextPreprocessor",
           "TokenAccuracy"]
