"""Keras' own file of an albert_tf model (`model.save("m.keras")`) as a layout: read
wherever a release is (`from_release`, `--init_checkpoint`, `albert_tf.convert
--input`), its weights under their TF1 names, which are the models' variable paths.

A `.keras` file is a zip of `config.json` (the model's Keras config, with the
`AlbertConfig` inside: `config.read_keras_file_config`), `model.weights.h5` and
`metadata.json`. The model is made again by Keras' `load_model` (every albert_tf model
is a registered serializable; a task module's once its file is loaded), then read by
path. A file of another package's model is refused by name before anything is built.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.tf1 import CheckpointError, LoadReport, load_weights
from albert_tf.config import KERAS_FILE_SUFFIX, read_keras_file_config


def is_keras_file(path) -> bool:
    return os.fspath(path).endswith(KERAS_FILE_SUFFIX)


class KerasFileReader:
    """A checkpoint reader (as `checkpoints.load_weights` takes) over an albert_tf
    model's `.keras` file: the model made again by Keras, its (LoRA-merged) weights by
    path, which are their TF1 names."""

    layout = "keras"

    def __init__(self, path: str):
        import keras

        values = read_keras_file_config(path)  # refuses another package's first
        try:
            model = keras.saving.load_model(path, compile=False)
        except TypeError as e:  # Keras: "Could not locate class ..."
            raise CheckpointError(
                f"{path} holds {values.get('registered_name')}, which Keras cannot make "
                f"here ({str(e).splitlines()[0]}); a task module's model needs its file "
                "loaded first (--task_module)") from None
        self.path = path
        self._values = {name: np.asarray(tf.convert_to_tensor(w).numpy())
                        for name, w in model.merged_weights().items()}

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {n: list(v.shape) for n, v in self._values.items()}

    def get_variable_to_dtype_map(self) -> dict[str, tf.DType]:
        return {n: tf.as_dtype(v.dtype) for n, v in self._values.items()}

    def get_tensor(self, name: str) -> np.ndarray:
        return self._values[name]


def load_keras_file(model, path, *, strict: bool = False) -> LoadReport:
    """Assigns the model's variables from an albert_tf model's `.keras` file."""
    path = os.fspath(path)
    return load_weights(model, KerasFileReader(path), path, strict=strict, prefix="")
