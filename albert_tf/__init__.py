"""albert_tf: ALBERT for TensorFlow 2 / Keras 3: Google's, brightmart's (albert_zh) and
Hugging Face checkpoints read by name, fine-tuning, pretraining and serving."""

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
from albert_tf.config import AlbertConfig, ConfigError, available_configs  # noqa: E402
from albert_tf.modeling import (  # noqa: E402
    AlbertClassifier,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSquadV1,
    AlbertSquadV2,
    AlbertTokenClassifier,
)
from albert_tf.modeling.base import set_release_reader as _set_release_reader  # noqa: E402

# `AlbertModel.from_release` reads with the checkpoint readers, which sit above the
# models: the package joins the two here.
_set_release_reader(load_model)

__version__ = "0.1.0"

__all__ = [
    "AlbertClassifier",
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertMultipleChoice",
    "AlbertPretrainer",
    "AlbertSquadV1",
    "AlbertSquadV2",
    "AlbertTokenClassifier",
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
    "save_tf1_checkpoint",
]
