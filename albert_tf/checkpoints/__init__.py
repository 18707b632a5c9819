"""Checkpoints of every layout, read and written by TF1 variable name: the one package
that does file I/O for weights, above `albert_tf.modeling` (which reads no file).

- `tf1`: TF1 name-based checkpoints (Google's releases; what the scripts save), the
  matching of names to a model's variables, `LoadReport`.
- `brightmart`: brightmart/albert_zh's names and config, as Google's layout.
- `huggingface`: `transformers` directories (safetensors), both ways.
- `keras_hub_preset`: keras-hub ALBERT presets (Keras `.weights.h5`), both ways.
- `keras_file`: Keras' own `.keras` file of an albert_tf model, read.
- `release`: release directories of any of them: their files, `load_checkpoint`,
  and `load_model`, which `AlbertModel.from_release` calls.

"Layout" in this package means one of those checkpoint formats: "google", "brightmart",
"huggingface", "keras_hub" or "keras".
"""

from albert_tf.checkpoints.release import (  # noqa: E402  (after tf1: it reads it)
    ReleaseFiles,
    describe_checkpoint,
    find_release_files,
    load_checkpoint,
    load_model,
)
from albert_tf.checkpoints.tf1 import (
    CheckpointError,
    LoadReport,
    is_training_state,
    list_checkpoint_variables,
    load_tf1_checkpoint,
    load_weights,
    open_reader,
    resolve_checkpoint,
    save_tf1_checkpoint,
    tf1_name,
)

__all__ = ["CheckpointError", "LoadReport", "ReleaseFiles", "describe_checkpoint",
           "find_release_files", "is_training_state", "list_checkpoint_variables",
           "load_checkpoint", "load_model", "load_tf1_checkpoint", "load_weights",
           "open_reader", "resolve_checkpoint", "save_tf1_checkpoint", "tf1_name"]
