"""keras-hub ALBERT presets, both ways: read a preset directory by name, write one that
`keras_hub.models.AlbertBackbone.from_preset` (and `AlbertTextClassifier.from_preset`)
loads with the same outputs. keras-hub itself is never imported: the files are JSON and
Keras' `.weights.h5` (HDF5, through h5py, which Keras requires).

A preset (`save_to_preset`) holds `config.json` (the backbone's Keras config:
`keras_hub>AlbertBackbone`), `model.weights.h5`, `metadata.json`, and for a tokenizer
`tokenizer.json` with `assets/tokenizer/vocabulary.spm`; a task's preset adds
`task.json`, `task.weights.h5` (the head alone) and `preprocessor.json`.

Its math is the original's (post-LayerNorm blocks, the tanh GELU, LayerNorm epsilon
1e-12, group g used for layers [g L/G, (g+1) L/G)); only names and shapes differ:
- Keras saves a layer's variables under `layers/<its class in snake case, numbered in
  the order of the model's layers>/vars/<i>`, a sub-layer under its attribute name
  (`_self_attention_layer/query_dense`); each `vars` group records the layer's own name
  (`group_0_inner_layer_1`), which the reader checks.
- The attention kernels are [H, heads, head size] and [heads, head size, H], the
  original's [H, H] reshaped; the classifier's kernel is [H, labels], the transpose of
  `output_weights`.
- keras-hub always projects E to H; where E = H the original has no projection, so the
  preset's must be the identity (written so, checked when read).
- It has one `dropout` for the hidden states and the attention probabilities, and no
  `initializer_range` (its initializer has stddev 0.02).

keras-hub's tokenizer is SentencePiece alone, without the original's `preprocess_text`
(lowercasing, accents): the `vocabulary.spm` written here is the model with those rules
folded into its normalizer (`tokenization.folded_sentencepiece_model`), so that
keras-hub's ids are ours; the original's re-split of pieces such as `▁1990,`
(`tokenization.resplit_piece`) is the one rule a SentencePiece model cannot hold. A
WordPiece vocabulary (the Chinese models) has no keras-hub ALBERT tokenizer: such a
preset holds the backbone and the head, and the vocabulary beside them for albert_tf.
"""

from __future__ import annotations

import datetime
import io
import json
import os
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, task_heads
from albert_tf.checkpoints.tf1 import CheckpointError, LoadReport, load_weights
from albert_tf.config import KERAS_HUB_BACKBONE, AlbertConfig, keras_hub_class

CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
METADATA = "metadata.json"
TASK_CONFIG = "task.json"
TASK_WEIGHTS = "task.weights.h5"
PREPROCESSOR = "preprocessor.json"
TOKENIZER = "tokenizer.json"
TOKENIZER_ASSETS = "assets/tokenizer"
VOCABULARY_SPM = f"{TOKENIZER_ASSETS}/vocabulary.spm"
# Not keras-hub's: a WordPiece vocabulary, kept for albert_tf's own tokenizer.
VOCABULARY_TXT = f"{TOKENIZER_ASSETS}/vocab.txt"

BACKBONE = KERAS_HUB_BACKBONE
TEXT_CLASSIFIER = "AlbertTextClassifier"
_MODULES = {BACKBONE: "keras_hub.src.models.albert.albert_backbone",
            TEXT_CLASSIFIER: "keras_hub.src.models.albert.albert_text_classifier",
            "AlbertTokenizer": "keras_hub.src.models.albert.albert_tokenizer",
            "AlbertTextClassifierPreprocessor":
                "keras_hub.src.models.albert.albert_text_classifier_preprocessor"}
# The keras-hub tasks whose head is one of ours: task class -> (our head, and its
# variables by the layer and index of the task's weights file, transposed or not).
TASKS = {TEXT_CLASSIFIER: (task_heads.CLASSIFIER, {
    "output_weights": ("logits", 0, True), "output_bias": ("logits", 1, False)})}
# What the task's layers are called in its weights file (`layers/dense`: the one Dense).
_TASK_PATHS = {TEXT_CLASSIFIER: {"logits": "layers/dense"}}
_TASK_NAMES = {TEXT_CLASSIFIER: "albert_text_classifier"}  # the task's own Keras name
_TASK_SEQUENCE_LENGTH = 512  # keras-hub's preprocessors' default


# ----------------------------------------------------------------------- the config
def preset_class(directory: str) -> str | None:
    """The keras-hub class named by `directory`'s config.json (`AlbertBackbone`,
    `BertBackbone`, ...); None where there is no such file or it is not keras-hub's."""
    path = os.path.join(directory, CONFIG)
    if not fileio.exists(path):
        return None
    try:
        return keras_hub_class(json.loads(fileio.read_bytes(path)))
    except ValueError:
        return None


def _read_json(path: str) -> dict:
    try:
        values = json.loads(fileio.read_bytes(path))
    except ValueError as e:
        raise CheckpointError(f"{path} is not JSON: {e}") from None
    if not isinstance(values, dict) or not isinstance(values.get("config"), dict):
        raise CheckpointError(f"{path} is not a Keras config (no 'config' object)")
    return values


def check_preset(directory: str) -> None:
    """Raises unless `directory` is a keras-hub ALBERT preset with its weights."""
    name = preset_class(directory)
    if name != BACKBONE:
        raise CheckpointError(
            f"{os.path.join(directory, CONFIG)} is a keras-hub preset of {name}, not of "
            f"ALBERT ({BACKBONE}); albert_tf reads ALBERT weights only")
    weights = os.path.join(directory, WEIGHTS)
    if not fileio.exists(weights):
        sharded = tf.io.gfile.glob(os.path.join(directory, "model_*.weights.h5"))
        detail = (f" (it has {len(sharded)} sharded weights files, which albert_tf does "
                  "not read: save it again unsharded)") if sharded else ""
        raise CheckpointError(f"keras-hub preset {directory} has no {WEIGHTS}{detail}")


def backbone_config(config: AlbertConfig, where: str) -> dict:
    """keras-hub's AlbertBackbone config for `config` (`AlbertConfig.to_keras_hub_dict`);
    a dropout rate it cannot keep is warned about."""
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        logging.warning(
            "%s: keras-hub has one dropout rate; written: hidden_dropout_prob %s "
            "(attention_probs_dropout_prob %s is not kept)", where,
            config.hidden_dropout_prob, config.attention_probs_dropout_prob)
    return {"name": "albert_backbone", "trainable": True, "dtype": _dtype_policy("float32"),
            **config.to_keras_hub_dict()}


def _dtype_policy(name: str) -> dict:
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def _serialized(class_name: str, config: dict) -> dict:
    return {"module": _MODULES[class_name], "class_name": class_name, "config": config,
            "registered_name": f"keras_hub>{class_name}"}


# ---------------------------------------------------------------- the weights' names
class Entry(NamedTuple):
    """Where a TF1 variable lives in a preset: its file, the layer's group, the index
    of the variable in its `vars`, the layer's own name (as its `vars` records it),
    and whether the value is the transpose of the TF1 one."""

    file: str
    group: str
    index: int
    layer: str
    transposed: bool = False


def _keras_names(classes: list[str]) -> list[str]:
    """Keras' paths of a model's layers of these classes (snake case), in order: the
    first of a class under its name, the next ones with _1, _2, ..."""
    seen: dict[str, int] = {}
    paths = []
    for name in classes:
        count = seen.get(name, 0)
        seen[name] = count + 1
        paths.append(f"layers/{name}" + (f"_{count}" if count else ""))
    return paths


def _backbone_layers(config: AlbertConfig) -> list[tuple[str, str]]:
    """(layer name, class in snake case) of keras-hub's AlbertBackbone, in the order of
    its `layers` (the inputs where the Functional model meets them)."""
    blocks = [(f"group_{g}_inner_layer_{i}", "transformer_encoder")
              for g in range(config.num_hidden_groups) for i in range(config.inner_group_num)]
    return [("token_ids", "input_layer"), ("token_embedding", "reversible_embedding"),
            ("segment_ids", "input_layer"), ("position_embedding", "position_embedding"),
            ("segment_embedding", "embedding"), ("embeddings_add", "add"),
            ("embeddings_layer_norm", "layer_normalization"),
            ("embeddings_dropout", "dropout"), ("embedding_projection", "dense"),
            ("padding_mask", "input_layer"), *blocks, ("pooled_dense", "dense")]


# A block's variables: TF1 scope under the block -> (its sub-layer, that layer's name);
# the attention's dense layers have [H, heads, head size] kernels.
_BLOCK = {
    "attention_1/self/query": ("_self_attention_layer/query_dense", "query"),
    "attention_1/self/key": ("_self_attention_layer/key_dense", "key"),
    "attention_1/self/value": ("_self_attention_layer/value_dense", "value"),
    "attention_1/output/dense": ("_self_attention_layer/output_dense", "attention_output"),
    "LayerNorm": ("_self_attention_layer_norm", "self_attention_layer_norm"),
    "ffn_1/intermediate/dense": ("_feedforward_intermediate_dense",
                                 "feedforward_intermediate_dense"),
    "ffn_1/intermediate/output/dense": ("_feedforward_output_dense",
                                        "feedforward_output_dense"),
    "LayerNorm_1": ("_feedforward_layer_norm", "feedforward_layer_norm"),
}
# Keras' LayerNormalization keeps gamma, then beta; a Dense its kernel, then its bias.
_ORDER = {"kernel": 0, "bias": 1, "gamma": 0, "beta": 1}
PROJECTION = "bert/encoder/embedding_hidden_mapping_in"


def _layer_entries(group: str, layer: str, scope: str, suffixes) -> dict[str, Entry]:
    return {f"{scope}/{s}": Entry(WEIGHTS, group, _ORDER[s], layer) for s in suffixes}


def backbone_table(config: AlbertConfig) -> dict[str, Entry]:
    """TF1 name -> `Entry` for every backbone weight of the original (the projection
    too where E = H: the original has none, the preset always)."""
    path = {name: group for group, name in backbone_layer_paths(config).items()}
    table = {
        "bert/embeddings/word_embeddings": Entry(WEIGHTS, path["token_embedding"], 0,
                                                 "token_embedding"),
        "bert/embeddings/position_embeddings": Entry(WEIGHTS, path["position_embedding"],
                                                     0, "position_embedding"),
        "bert/embeddings/token_type_embeddings": Entry(WEIGHTS, path["segment_embedding"],
                                                       0, "segment_embedding"),
        **_layer_entries(path["embeddings_layer_norm"], "embeddings_layer_norm",
                         "bert/embeddings/LayerNorm", ("gamma", "beta")),
        **_layer_entries(path["embedding_projection"], "embedding_projection", PROJECTION,
                         ("kernel", "bias")),
        **_layer_entries(path["pooled_dense"], "pooled_dense", "bert/pooler/dense",
                         ("kernel", "bias")),
    }
    for g in range(config.num_hidden_groups):
        for i in range(config.inner_group_num):
            block = f"group_{g}_inner_layer_{i}"
            for scope, (sublayer, name) in _BLOCK.items():
                suffixes = ("gamma", "beta") if "LayerNorm" in scope else ("kernel", "bias")
                table.update(_layer_entries(
                    f"{path[block]}/{sublayer}", name,
                    f"bert/encoder/transformer/group_{g}/inner_group_{i}/{scope}", suffixes))
    return table


def task_table(task: str) -> dict[str, Entry]:
    """TF1 name -> `Entry` of a keras-hub task's head (in its task weights file)."""
    head, variables = TASKS[task]
    return {name: Entry(TASK_WEIGHTS, _TASK_PATHS[task][layer], index, layer, transposed)
            for name, (layer, index, transposed) in variables.items()}


def tf1_shape(name: str, stored: tuple[int, ...], config: AlbertConfig) -> tuple[int, ...]:
    """The TF1 shape of a stored value: the attention's [H, heads, size] kernels and
    [heads, size] biases, and its output's [heads, size, H] kernel, are [H, H] and
    [H]; everything else keeps its shape (a transposed one reversed)."""
    hidden = config.hidden_size
    wanted = (hidden, hidden) if name.endswith("/kernel") else (hidden,)
    if "/attention_1/" in name and int(np.prod(stored)) == int(np.prod(wanted)):
        return wanted
    return tuple(stored)  # (a size that does not fit is reported as it is)


# --------------------------------------------------------------------------- reading
def _open_h5(path: str):
    import h5py

    if fileio.is_url(path):
        return h5py.File(io.BytesIO(fileio.read_bytes(path)), "r")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise CheckpointError(f"cannot read {path} as Keras weights (HDF5): {e}") from None


def _array(dataset) -> np.ndarray:
    value = dataset[()]
    if dataset.attrs.get("dtype") == "bfloat16":  # Keras stores bfloat16 as uint16 bits
        value = (np.asarray(value, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(value)


def preset_task(directory: str) -> str | None:
    """The keras-hub task of `directory`'s task.json whose head albert_tf reads (with
    its weights file present); None where there is none."""
    path = os.path.join(directory, TASK_CONFIG)
    if not fileio.exists(path):
        return None
    task = _read_json(path).get("class_name")
    if task not in TASKS:
        logging.info("%s: keras-hub task %s has no albert_tf head; its backbone is read",
                     path, task)
        return None
    if not fileio.exists(os.path.join(directory, TASK_WEIGHTS)):
        raise CheckpointError(f"keras-hub preset {directory} has {TASK_CONFIG} "
                              f"({task}) but no {TASK_WEIGHTS}")
    return task


def backbone_layer_paths(config: AlbertConfig) -> dict[str, str]:
    """Keras' path of each layer of keras-hub's AlbertBackbone -> the layer's name."""
    layers = _backbone_layers(config)
    return dict(zip(_keras_names([c for _, c in layers]), (n for n, _ in layers)))


def _check_layer_name(h5, path: str, group: str, layer: str) -> None:
    """Raises where the file records another layer's name at `group` (weights of
    another config than the preset's config.json)."""
    if f"{group}/vars" not in h5:
        return
    recorded = h5[f"{group}/vars"].attrs.get("name")
    if recorded is not None and str(recorded) != layer:
        raise CheckpointError(
            f"{path}: {group} is keras-hub's layer {str(recorded)!r}, where its "
            f"{BACKBONE} of this config has {layer!r}; the weights do not fit the "
            "preset's config.json")


class KerasHubReader:
    """A checkpoint reader (as `checkpoints.load_weights` takes) over a keras-hub ALBERT
    preset: its weights shown under the TF1 names of `backbone_table` (and the task's
    head, `task_table`), reshaped and transposed as the original holds them. Each
    weights file is opened once here, for the shapes; values are read by
    `get_tensor`."""

    layout = "keras_hub"

    def __init__(self, directory: str, config: AlbertConfig):
        check_preset(directory)
        self.path = directory
        self.config = config
        table = backbone_table(config)
        task = preset_task(directory)
        if task is not None:
            table.update(task_table(task))
        self._files = {WEIGHTS: os.path.join(directory, WEIGHTS)}
        if task is not None:
            self._files[TASK_WEIGHTS] = os.path.join(directory, TASK_WEIGHTS)
        self._table, self._shapes, self._stored = {}, {}, {}
        found = set()
        for file, path in self._files.items():
            with _open_h5(path) as h5:
                # (a task's optimizer state is not a weight: never read, not reported)
                found.update(f"{file}:{n}" for n in _dataset_names(h5)
                             if not n.startswith("optimizer/"))
                for name, entry in table.items():
                    if entry.file != file:
                        continue
                    key = f"{entry.group}/vars/{entry.index}"
                    if key not in h5:
                        continue
                    _check_layer_name(h5, path, entry.group, entry.layer)
                    shape = tuple(h5[key].shape)
                    self._stored[name] = f"{file}:{key}"
                    self._table[name] = entry
                    self._shapes[name] = tf1_shape(
                        name, shape[::-1] if entry.transposed else shape, config)
                if file == WEIGHTS:  # the blocks too, whose sub-layers' names repeat
                    for group, layer in backbone_layer_paths(config).items():
                        _check_layer_name(h5, path, group, layer)
        self._identity = []
        if config.embedding_size == config.hidden_size:
            self._check_identity()
        self._unmapped = sorted(found - set(self._stored.values()))

    def _value(self, name: str) -> np.ndarray:
        entry = self._table[name]
        with _open_h5(self._files[entry.file]) as h5:
            value = _array(h5[f"{entry.group}/vars/{entry.index}"])
        if entry.transposed:
            value = value.T
        return value.reshape(self._shapes[name])

    def _check_identity(self) -> None:
        """keras-hub projects E to H always; with E = H the original does not, so the
        projection must be the identity (then it is read as nothing)."""
        names = [f"{PROJECTION}/kernel", f"{PROJECTION}/bias"]
        if not all(n in self._table for n in names):
            return
        kernel, bias = (self._value(n) for n in names)
        if not (np.array_equal(kernel, np.eye(self.config.hidden_size)) and not np.any(bias)):
            raise CheckpointError(
                f"{self.path}: embedding_dim = hidden_dim = {self.config.hidden_size}, "
                "where the original ALBERT has no embedding projection, but this preset's "
                "embedding_projection is not the identity; it cannot be read exactly")
        for name in names:  # read, and found to be nothing: neither used nor unused
            self._identity.append(self._stored.pop(name))
            del self._table[name], self._shapes[name]

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {n: list(s) for n, s in self._shapes.items()}

    def get_variable_to_dtype_map(self) -> dict[str, tf.DType]:
        return dict.fromkeys(self._shapes, tf.float32)

    def source_names(self, name: str) -> tuple[str, ...]:
        return (self._stored[name],)

    def unmapped_names(self) -> list[str]:
        return [n for n in self._unmapped if n not in self._identity]

    def get_tensor(self, name: str) -> np.ndarray:
        return self._value(name).astype(np.float32, copy=False)


def _dataset_names(h5) -> list[str]:
    import h5py

    names = []
    h5.visititems(lambda name, item: names.append(name)
                  if isinstance(item, h5py.Dataset) else None)
    return names


def load_keras_hub_checkpoint(model, directory, *, strict: bool = False) -> LoadReport:
    """Assigns the model's variables from a keras-hub preset directory (shapes checked
    before anything is assigned)."""
    directory = os.fspath(directory)
    reader = KerasHubReader(directory, model.config)
    return load_weights(model, reader, directory, strict=strict, prefix="")


# --------------------------------------------------------------------------- writing
def _task_of(model) -> str | None:
    """The keras-hub task whose head the model's heads are, None for the backbone."""
    for task, (head, _) in TASKS.items():
        if tuple(model.heads) == (head,):
            return task
    return None


def _writable_heads(model) -> None:
    """Raises for a fine-tuned head keras-hub has no task for; pretraining heads are
    left out with a warning (keras-hub's masked LM normalizes with epsilon 1e-5, not
    the original's 1e-12, and it has no sentence-order head)."""
    if not model.heads or _task_of(model) is not None:
        return
    pretraining = {task_heads.MASKED_LM, task_heads.SENTENCE_ORDER}
    if set(model.heads) <= pretraining:
        logging.warning("%s: the pretraining heads (%s) have no keras-hub counterpart "
                        "that computes as the original; the preset holds the backbone",
                        model.name, ", ".join(h.name for h in model.heads))
        return
    raise CheckpointError(
        f"{model.name} ({type(model).__name__}) has heads keras-hub has no ALBERT task "
        f"for ({', '.join(h.name for h in model.heads)}); keras-hub's ALBERT tasks: "
        f"{', '.join(TASKS)}. Write its encoder alone (albert_tf.convert --kind=encoder)")


def _write_h5(groups: dict[str, dict[int, np.ndarray]], names: dict[str, str],
              root: str) -> bytes:
    """A Keras `.weights.h5`: each group's `vars` with its layer's name and variables."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        h5.create_group("vars").attrs["name"] = root
        for group in sorted(set(groups) | set(names)):
            node = h5.require_group(group).require_group("vars")
            node.attrs["name"] = names[group]
            for index, value in sorted(groups.get(group, {}).items()):
                node.create_dataset(str(index), data=value)
    return buffer.getvalue()


def _stored_value(name: str, value: np.ndarray, entry: Entry, config: AlbertConfig):
    """The TF1 value as the preset stores it (the inverse of `tf1_shape`)."""
    if entry.transposed:
        value = value.T
    if "/attention_1/" in name:
        heads, size = config.num_attention_heads, config.attention_head_size
        hidden = config.hidden_size
        if name.endswith("/bias"):
            value = value.reshape(heads, size) if "/self/" in name else value
        elif "/self/" in name:
            value = value.reshape(hidden, heads, size)
        else:
            value = value.reshape(heads, size, hidden)
    return np.ascontiguousarray(value, np.float32)


def preset_weights(model) -> dict[str, bytes]:
    """The model's weights files: `model.weights.h5`, and `task.weights.h5` for a model
    with a keras-hub task."""
    config = model.config
    values = {name: np.asarray(tf.convert_to_tensor(w).numpy(), np.float32)
              for name, w in model.merged_weights().items()}
    if config.embedding_size == config.hidden_size:
        values[f"{PROJECTION}/kernel"] = np.eye(config.hidden_size, dtype=np.float32)
        values[f"{PROJECTION}/bias"] = np.zeros(config.hidden_size, np.float32)
    task = _task_of(model)
    tables = {WEIGHTS: backbone_table(config), TASK_WEIGHTS: task_table(task) if task else {}}
    files = {}
    for file, table in tables.items():
        if not table:
            continue
        groups: dict[str, dict[int, np.ndarray]] = {}
        names = {}
        for name, entry in table.items():
            if name not in values:
                raise CheckpointError(f"{model.name} has no {name} to write to {file}")
            groups.setdefault(entry.group, {})[entry.index] = _stored_value(
                name, values[name], entry, config)
            names[entry.group] = entry.layer
        if file == WEIGHTS:  # the blocks' groups too hold their names
            for path, layer in backbone_layer_paths(config).items():
                if any(g.startswith(path + "/") for g in groups):
                    names[path] = layer
        if file == TASK_WEIGHTS:
            # What keras-hub's own file of a new task holds beside the head: its
            # default optimizer (Adam, learning rate 1e-5), not yet stepped; without it
            # Keras warns that the optimizer's state is missing.
            groups["optimizer"] = {0: np.zeros((), np.int64), 1: np.float32(1e-5)}
            names["optimizer"] = "adam"
        files[file] = _write_h5(groups, names, "albert_backbone" if file == WEIGHTS
                                else _TASK_NAMES[task])
    return files


def _parameter_count(weights: bytes) -> int:
    """The backbone's parameters, as keras-hub's metadata counts them."""
    with _open_h5_bytes(weights) as h5:
        return int(sum(np.prod(h5[n].shape) for n in _dataset_names(h5)))


def _open_h5_bytes(data: bytes):
    import h5py

    return h5py.File(io.BytesIO(data), "r")


def _tokenizer_config() -> dict:
    return _serialized("AlbertTokenizer", {
        "name": "albert_tokenizer", "trainable": True, "dtype": _dtype_policy("int32"),
        "config_file": TOKENIZER, "proto": None, "sequence_length": None,
        "add_bos": False, "add_eos": False})


def _preprocessor_config(sequence_length: int) -> dict:
    return _serialized("AlbertTextClassifierPreprocessor", {
        "name": "albert_text_classifier_preprocessor", "trainable": True,
        "dtype": _dtype_policy("float32"), "tokenizer": _tokenizer_config(),
        "config_file": PREPROCESSOR, "sequence_length": sequence_length,
        "truncate": "round_robin"})


def _write_json(path: str, values: dict) -> None:
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(values, indent=4) + "\n")


def save_keras_hub_preset(model, directory, *, spm_model_file=None, vocab_file=None,
                          do_lower_case: bool = True,
                          sequence_length: int | None = None) -> str:
    """Writes `directory` as keras-hub's `save_to_preset` would for the model's
    counterpart: the backbone (an encoder or pretrainer's; see `_writable_heads`), and
    for a classifier its `AlbertTextClassifier` task. Given a SentencePiece model, the
    tokenizer (its `preprocess_text` folded in; a task's preprocessor packs
    `sequence_length` tokens, default 512); given a WordPiece vocabulary, that file for
    albert_tf alone. Written under a temporary name and renamed when complete; the
    directory must not exist yet (or be empty). Returns it."""
    import keras

    from albert_tf.tokenization import folded_sentencepiece_model

    directory = os.fspath(directory).rstrip("/")
    if tf.io.gfile.isdir(directory):
        if tf.io.gfile.listdir(directory):
            raise FileExistsError(f"{directory} exists and is not empty; not overwritten")
        tf.io.gfile.rmtree(directory)
    _writable_heads(model)
    backbone = backbone_config(model.config, model.name)
    task = _task_of(model)
    files = preset_weights(model)
    sequence_length = sequence_length or min(_TASK_SEQUENCE_LENGTH,
                                             model.config.max_position_embeddings)
    with fileio.atomic_directory(directory) as tmp:
        _write_json(os.path.join(tmp, CONFIG), _serialized(BACKBONE, backbone))
        for name, data in files.items():
            fileio.write_bytes_atomically(os.path.join(tmp, name), data)
        tf.io.gfile.makedirs(os.path.join(tmp, TOKENIZER_ASSETS))
        if spm_model_file:
            fileio.write_bytes_atomically(
                os.path.join(tmp, VOCABULARY_SPM),
                folded_sentencepiece_model(os.fspath(spm_model_file), bool(do_lower_case)))
            _write_json(os.path.join(tmp, TOKENIZER), _tokenizer_config())
        elif vocab_file:
            tf.io.gfile.copy(vocab_file, os.path.join(tmp, VOCABULARY_TXT))
        if task is not None:
            preprocessor = _preprocessor_config(sequence_length) if spm_model_file else None
            if preprocessor is not None:
                _write_json(os.path.join(tmp, PREPROCESSOR), preprocessor)
            _write_json(os.path.join(tmp, TASK_CONFIG), _serialized(task, {
                "backbone": _serialized(BACKBONE, backbone), "preprocessor": preprocessor,
                "name": _TASK_NAMES[task], "num_classes": int(model.num_labels),
                "activation": "linear", "dropout": float(model.dropout_rate)}))
        _write_json(os.path.join(tmp, METADATA), {
            "keras_version": keras.__version__,
            "parameter_count": _parameter_count(files[WEIGHTS]),
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": [task] if task else [], "written_by": "albert_tf"})
    logging.info("wrote keras-hub preset %s (%s%s)", directory, BACKBONE,
                 f" and {task}" if task else "")
    return directory
