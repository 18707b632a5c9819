"""albert_tf: ALBERT for TensorFlow 2 / Keras 3: Google's, brightmart's (albert_zh) and
Hugging Face checkpoints read by name, fine-tuning, pretraining and serving.

The task models (`albert_tf.AlbertClassifier`, `AlbertMultiLabelClassifier`, ...) are
the models of the registered tasks (`albert_tf.tasks.model_classes`)."""

import os as _os

# The package is written for Keras 3 on TensorFlow; say so before Keras picks another.
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras as _keras  # noqa: E402

if _keras.backend.backend() != "tensorflow":
    raise ImportError(
        "albert_tf needs Keras 3 with the TensorFlow backend, but Keras runs on "
        f"{_keras.backend.backend()!r}: set KERAS_BACKEND=tensorflow")

from albert_tf import losses  # noqa: E402
from albert_tf.checkpoints import (  # noqa: E402
    CheckpointError,
    LoadReport,
    describe_checkpoint,
    find_release_files,
    load_checkpoint,
    load_model,
    load_tf1_checkpoint,
    save_tf1_checkpoint,
)
from albert_tf.checkpoints.huggingface import (  # noqa: E402
    load_hf_checkpoint,
    save_hf_checkpoint,
)
from albert_tf.checkpoints.keras_hub_preset import save_keras_hub_preset  # noqa: E402
from albert_tf.config import AlbertConfig, ConfigError, available_configs  # noqa: E402
from albert_tf.export.kinds import set_kind_finder as _set_kind_finder  # noqa: E402
from albert_tf.modeling import AlbertEncoder, AlbertPretrainer  # noqa: E402
from albert_tf.modeling.base import set_release_reader as _set_release_reader  # noqa: E402
from albert_tf.tasks import registered as _registered  # noqa: E402
from albert_tf.tasks import serving_kinds as _serving_kinds  # noqa: E402
from albert_tf.text_models import (  # noqa: E402
    AlbertTextClassifier,
    AlbertTextMultipleChoice,
    AlbertTextTokenClassifier,
    TextPreprocessor,
)

# `AlbertModel.from_release` reads with the checkpoint readers, which sit above the
# models, and the export finds a serving kind by name among the tasks', which sit above
# it: the package joins them here.
_set_release_reader(load_model)
_set_kind_finder(_serving_kinds)
# Every task module of the registry, imported now: their models are registered with
# Keras as their classes are made, so that a `.keras` file of any of them loads after
# `import albert_tf` alone.
_registered()


def __getattr__(name):
    # The task models (`albert_tf.AlbertClassifier`, ...), from the task registry when
    # first asked for: the models of the registered tasks' serving kinds.
    if name.startswith("Albert"):
        from albert_tf.tasks import model_classes

        found = model_classes().get(name)
        if found is not None:
            return found
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    from albert_tf.tasks import model_classes

    return sorted({*globals(), *model_classes()})

__version__ = "0.1.0"

__all__ = [
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertPretrainer",
    "AlbertTextClassifier",
    "AlbertTextMultipleChoice",
    "AlbertTextTokenClassifier",
    "CheckpointError",
    "ConfigError",
    "LoadReport",
    "available_configs",
    "describe_checkpoint",
    "find_release_files",
    "load_checkpoint",
    "load_hf_checkpoint",
    "load_model",
    "load_tf1_checkpoint",
    "losses",
    "save_hf_checkpoint",
    "save_keras_hub_preset",
    "save_tf1_checkpoint",
    "TextPreprocessor",
]
