"""Hugging Face ALBERT directories, both ways: read `model.safetensors` by name, write
a directory that `transformers` loads with the same outputs.

A directory written by `transformers`' `save_pretrained` holds `config.json` (read by
`AlbertConfig.from_hf_dict`), `model.safetensors` (a state dict: names such as
`albert.encoder.albert_layer_groups.0.albert_layers.1.ffn.weight`), and the tokenizer's
files (`spiece.model` or `vocab.txt`, with `tokenizer_config.json`). Its math is
Google's; only the names differ, and a `Linear` weight is [out, in], the transpose of a
TF kernel. `key_table` below maps one to the other, for reading and for writing.

A BERT directory (`model_type: "bert"`, e.g. a MiniLM) is read too, as the ALBERT that
shares nothing: its layer N is group N of one inner group, E = H, erf GELU
(`AlbertConfig.from_hf_dict`); `BLOCK_KEYS` holds both families' names.

Safetensors are read and written with the `safetensors` package's NumPy API: no
PyTorch. A `pytorch_model.bin` is a pickle, which albert_tf never opens.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, names, task_heads
from albert_tf.checkpoints.tf1 import CheckpointError, LoadReport, load_weights, tf1_name
from albert_tf.config import HF_ALBERT, HF_BERT, AlbertConfig

# `transformers` class of each of our models' heads (`AlbertModel.hf_architecture`)
from albert_tf.names import HF_BASE as BASE
from albert_tf.names import HF_PRETRAINING as PRETRAINING
from albert_tf.names import HF_SEQUENCE_CLASSIFICATION as SEQUENCE_CLASSIFICATION
from albert_tf.names import HF_TOKEN_CLASSIFICATION as TOKEN_CLASSIFICATION

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
CONFIG = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# Weights that `transformers` can hold that are not safetensors: a pickle (never opened
# here) or Keras h5 weights of its TF classes.
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
OTHER_WEIGHTS = ("tf_model.h5", "flax_model.msgpack")
CONVERT_HINT = (
    "convert it once where PyTorch is installed: python -c \"from transformers import "
    "AutoModel as M; M.from_pretrained('DIR').save_pretrained('DIR', "
    "safe_serialization=True)\" (use the Albert* class of its 'architectures' to keep "
    "the head), which writes model.safetensors")

class Key(NamedTuple):
    """Where a TF1 variable lives in a state dict: the key, and whether the value is the
    transpose (a `Linear` weight against a TF kernel)."""

    name: str
    transposed: bool = False


def _linear(scope: str, key: str) -> dict[str, Key]:
    return {f"{scope}/kernel": Key(f"{key}.weight", True), f"{scope}/bias": Key(f"{key}.bias")}


def _layer_norm(scope: str, key: str) -> dict[str, Key]:
    return {f"{scope}/gamma": Key(f"{key}.weight"), f"{scope}/beta": Key(f"{key}.bias")}


# The keys of one transformer block under `bert/encoder/transformer/group_G/
# inner_group_I/`, in each family's state dict ({block}: the block's key): ALBERT's
# `encoder.albert_layer_groups.G.albert_layers.I`, BERT's `encoder.layer.G` (a BERT is
# read as the ALBERT whose group G is its layer G, of one inner group).
BLOCK_KEYS = {
    HF_ALBERT: ("{base}encoder.albert_layer_groups.{group}.albert_layers.{inner}", {
        "attention_1/self/query": "attention.query", "attention_1/self/key": "attention.key",
        "attention_1/self/value": "attention.value",
        "attention_1/output/dense": "attention.dense", "LayerNorm": "attention.LayerNorm",
        "ffn_1/intermediate/dense": "ffn", "ffn_1/intermediate/output/dense": "ffn_output",
        "LayerNorm_1": "full_layer_layer_norm"}),
    HF_BERT: ("{base}encoder.layer.{group}", {
        "attention_1/self/query": "attention.self.query",
        "attention_1/self/key": "attention.self.key",
        "attention_1/self/value": "attention.self.value",
        "attention_1/output/dense": "attention.output.dense",
        "LayerNorm": "attention.output.LayerNorm", "ffn_1/intermediate/dense":
        "intermediate.dense", "ffn_1/intermediate/output/dense": "output.dense",
        "LayerNorm_1": "output.LayerNorm"}),
}
# Each family's prefix of the encoder in its task classes, and its pooler's key.
PREFIXES = {HF_ALBERT: "albert.", HF_BERT: "bert."}
POOLER_KEYS = {HF_ALBERT: "pooler", HF_BERT: "pooler.dense"}
# transformers' BERT classes whose weights are those of an ALBERT class here (the same
# head keys); its masked-LM and NSP heads have other names and are not read.
BERT_CLASSES = {"BertModel": BASE, "BertForSequenceClassification": SEQUENCE_CLASSIFICATION,
                "BertForTokenClassification": TOKEN_CLASSIFICATION,
                "BertForMultipleChoice": names.HF_MULTIPLE_CHOICE,
                "BertForQuestionAnswering": names.HF_QUESTION_ANSWERING}
# Buffers transformers saves beside the weights (the positions 0..P-1), not weights.
BUFFERS = ("embeddings.position_ids",)


def _block_keys(group: int, inner: int, base: str, family: str = HF_ALBERT) -> dict[str, Key]:
    scope = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
    block, parts = BLOCK_KEYS[family]
    key = block.format(base=base, group=group, inner=inner)
    keys = {}
    for ours, theirs in parts.items():
        pieces = _layer_norm if ours.startswith("LayerNorm") else _linear
        keys.update(pieces(f"{scope}/{ours}", f"{key}.{theirs}"))
    return keys


def family_of(keys) -> str:
    """The family of a state dict's keys: BERT's blocks are `encoder.layer.N`."""
    return HF_BERT if any("encoder.layer." in k for k in keys) else HF_ALBERT


def encoder_keys(config: AlbertConfig, base: str = "albert.",
                 family: str = HF_ALBERT) -> dict[str, Key]:
    """TF1 name -> state-dict key for everything under `bert/` (the mapping E -> H
    only where the TF1 model has it: E != H)."""
    if family == HF_BERT and (config.inner_group_num != 1 or config.embedding_size !=
                              config.hidden_size or config.num_hidden_groups !=
                              config.num_hidden_layers):
        raise CheckpointError(
            "a BERT's weights fit an ALBERT of one group per layer, one inner group and "
            f"embedding_size = hidden_size; this config has {config.num_hidden_groups} "
            f"groups for {config.num_hidden_layers} layers, {config.inner_group_num} "
            f"inner groups, E = {config.embedding_size}, H = {config.hidden_size}")
    keys = {
        "bert/embeddings/word_embeddings": Key(f"{base}embeddings.word_embeddings.weight"),
        "bert/embeddings/token_type_embeddings":
            Key(f"{base}embeddings.token_type_embeddings.weight"),
        "bert/embeddings/position_embeddings":
            Key(f"{base}embeddings.position_embeddings.weight"),
        **_layer_norm("bert/embeddings/LayerNorm", f"{base}embeddings.LayerNorm"),
        **_linear("bert/pooler/dense", f"{base}{POOLER_KEYS[family]}"),
    }
    if config.embedding_size != config.hidden_size:
        keys.update(_linear("bert/encoder/embedding_hidden_mapping_in",
                            f"{base}encoder.embedding_hidden_mapping_in"))
    for group in config.used_groups():
        for inner in range(config.inner_group_num):
            keys.update(_block_keys(group, inner, base, family))
    return keys


# What `transformers` ties to other weights (absent from its own files, or equal).
TIED = {"predictions.decoder.weight": "bert/embeddings/word_embeddings",
        "predictions.decoder.bias": "cls/predictions/output_bias"}
POOLER = "bert/pooler/"


def hf_class(architecture: str) -> task_heads.HfClass:
    architecture = BERT_CLASSES.get(architecture, architecture)
    if architecture not in task_heads.HF_CLASSES:
        raise CheckpointError(
            f"no Hugging Face class {architecture!r} for ALBERT here; known: "
            f"{', '.join(sorted([*task_heads.HF_CLASSES, *BERT_CLASSES]))}")
    return task_heads.HF_CLASSES[architecture]


def key_table(config: AlbertConfig, architecture: str, base: str = "albert.",
              heads=None, family: str = HF_ALBERT) -> dict[str, Key]:
    """TF1 name -> state-dict key for a `transformers` class (`AlbertModel` has no
    `albert.` prefix: `base=""`): the encoder's and those of `heads` (default: the
    heads of the class, `task_heads.HF_CLASSES`; a model gives its own). `family`:
    the keys of ALBERT's classes or of BERT's (`BERT_CLASSES`)."""
    spec = hf_class(architecture)
    keys = encoder_keys(config, base, family)
    if not spec.pooler:
        keys = {n: k for n, k in keys.items() if not n.startswith(POOLER)}
    heads = spec.heads if heads is None else heads
    keys.update({name: Key(key, transposed)
                 for name, (key, transposed) in task_heads.hf_keys(heads).items()})
    return keys


def check_group_rule(config: AlbertConfig, where: str) -> None:
    """`transformers` assigns layer i to group int(i / (L / G)), the original to
    int(i / L * G); refuses a config where float rounding makes them differ."""
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    theirs = [int(i / (layers / groups)) for i in range(layers)]
    ours = [config.group_index(i) for i in range(layers)]
    if theirs != ours:
        raise CheckpointError(
            f"{where}: with num_hidden_layers={layers} and num_hidden_groups={groups}, "
            f"transformers gives the layers the groups {theirs} and the original ALBERT "
            f"{ours}; such a model computes differently in each and is not converted")


# ----------------------------------------------------------------------------- reading
_TF_DTYPES = {"F64": tf.float64, "F32": tf.float32, "F16": tf.float16, "BF16": tf.bfloat16,
              "I64": tf.int64, "I32": tf.int32, "I16": tf.int16, "I8": tf.int8,
              "U8": tf.uint8, "BOOL": tf.bool}


def _safetensors_files(path: str) -> dict[str, str]:
    """key -> file, for `model.safetensors`, a shard index, or a directory holding one."""
    if tf.io.gfile.isdir(path):
        for name in (SAFETENSORS, SAFETENSORS_INDEX):
            if fileio.exists(os.path.join(path, name)):
                return _safetensors_files(os.path.join(path, name))
        refuse_other_weights(path)
        raise CheckpointError(f"no {SAFETENSORS} in Hugging Face directory {path}")
    if not fileio.exists(path):
        raise CheckpointError(f"no Hugging Face weights at {path}: file does not exist")
    if path.endswith(".json"):
        try:
            index = json.loads(fileio.read_bytes(path))
            weight_map = index["weight_map"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"{path} is not a safetensors shard index (no 'weight_map'): {e}") from None
        directory = os.path.dirname(path)
        return {k: os.path.join(directory, f) for k, f in weight_map.items()}
    from safetensors import safe_open

    try:
        with safe_open(path, framework="np") as f:
            return dict.fromkeys(f.keys(), path)
    except Exception as e:  # the package raises its own SafetensorError and OSError
        raise CheckpointError(f"cannot read {path} as safetensors: {e}") from None


def refuse_other_weights(directory: str) -> None:
    """Raises for a directory whose weights are a pickle or another format."""
    for name in PICKLES + OTHER_WEIGHTS:
        if fileio.exists(os.path.join(directory, name)):
            kind = ("a PyTorch pickle, which albert_tf never unpickles (it can run code)"
                    if name in PICKLES else "a format albert_tf does not read")
            raise CheckpointError(
                f"{os.path.join(directory, name)} is {kind}; albert_tf reads "
                f"{SAFETENSORS}: {CONVERT_HINT.replace('DIR', directory)}")


class HuggingFaceReader:
    """A checkpoint reader (as `checkpoints.load_weights` takes) over a `transformers`
    state dict in safetensors: its entries shown under the TF1 names of `key_table`,
    transposed where a `Linear` weight is a TF kernel. Nothing is read before
    `get_tensor`."""

    layout = "huggingface"

    def __init__(self, path: str, config: AlbertConfig, architecture: str | None = None,
                 heads=None):
        from safetensors import safe_open

        self.path = path
        self._files = _safetensors_files(path)
        self._safe_open = safe_open
        keys = set(self._files)
        self.family = family_of(keys)
        prefix = PREFIXES[self.family]
        base = prefix if any(k.startswith(prefix) for k in keys) else ""
        architecture = architecture or (PRETRAINING if base else BASE)
        check_group_rule(config, path)
        self.architecture = architecture
        self._table = {n: k for n, k in key_table(config, architecture, base, heads,
                                                  self.family).items()
                       if k.name in keys}
        info = self._slice_info()
        self._shapes, self._dtypes = {}, {}
        for name, key in self._table.items():
            shape, dtype = info[key.name]
            self._shapes[name] = shape[::-1] if key.transposed else shape
            self._dtypes[name] = dtype
        # Checked here, so that nothing is assigned from a file that does not fit.
        self._identity_mapping = None
        mapping = f"{base}encoder.embedding_hidden_mapping_in"
        if config.embedding_size == config.hidden_size and f"{mapping}.weight" in keys:
            self._check_identity(mapping, config.hidden_size)
            self._identity_mapping = (f"{mapping}.weight", f"{mapping}.bias")
        self._unmapped = sorted(keys - {k.name for k in self._table.values()}
                                - set(TIED) - set(self._identity_mapping or ())
                                - {f"{base}{b}" for b in BUFFERS})
        self._tied = sorted(set(TIED) & keys)

    def _slice_info(self) -> dict[str, tuple[list[int], tf.DType]]:
        """Shape and dtype of every key, each file opened once (headers only)."""
        info = {}
        for path in sorted(set(self._files.values())):
            with self._safe_open(path, framework="np") as f:
                for key in f.keys():
                    piece = f.get_slice(key)
                    info[key] = (list(piece.get_shape()),
                                 _TF_DTYPES.get(piece.get_dtype(), tf.string))
        return info

    def _read(self, key: str) -> np.ndarray:
        with self._safe_open(self._files[key], framework="np") as f:
            if f.get_slice(key).get_dtype() == "BF16":
                raise CheckpointError(
                    f"{key} in {self._files[key]} is bfloat16, which the safetensors "
                    "NumPy API cannot read; save the model in float32 first "
                    "(model.float().save_pretrained(...))")
            return f.get_tensor(key)

    def _check_identity(self, mapping: str, width: int) -> None:
        weight, bias = self._read(f"{mapping}.weight"), self._read(f"{mapping}.bias")
        if not (np.array_equal(weight, np.eye(width)) and not np.any(bias)):
            raise CheckpointError(
                f"{self.path}: embedding_size = hidden_size = {width}, where the "
                "original ALBERT has no embedding_hidden_mapping_in, but this model's "
                f"{mapping} is not the identity; it cannot be read exactly")

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return dict(self._shapes)

    def get_variable_to_dtype_map(self) -> dict[str, tf.DType]:
        return dict(self._dtypes)

    def source_names(self, name: str) -> tuple[str, ...]:
        return (self._table[name].name,)

    def unmapped_names(self) -> list[str]:
        """Keys of the file that no TF1 name reads (reported as unused)."""
        return list(self._unmapped)

    def get_tensor(self, name: str) -> np.ndarray:
        key = self._table[name]
        value = self._read(key.name)
        return value.T if key.transposed else value

    def check_tied(self) -> None:
        """A `predictions.decoder.*` stored beside the weights it is tied to must equal
        them (ALBERT always ties them)."""
        for key in self._tied:
            name = TIED[key]
            if name in self._table and not np.array_equal(self._read(key), self.get_tensor(name)):
                raise CheckpointError(
                    f"{self.path}: {key} differs from {self._table[name].name}; ALBERT "
                    "ties them, and a model with untied output embeddings is not ALBERT")


def read_hf_config(directory_or_file: str) -> tuple[AlbertConfig, dict]:
    """The `AlbertConfig` of a Hugging Face `config.json` and the raw dict."""
    path = directory_or_file
    if tf.io.gfile.isdir(path):
        path = os.path.join(path, CONFIG)
    config = AlbertConfig.from_json_file(path)
    return config, json.loads(fileio.read_bytes(path))


def load_hf_checkpoint(model, path, *, strict: bool = False,
                       architecture: str | None = None) -> LoadReport:
    """Assigns the model's variables from a Hugging Face `model.safetensors` (or a
    directory holding it, or a shard index). The head is read by `architecture` (the
    `transformers` class; default: the first of `config.json`'s `architectures`
    beside the weights, else `AlbertForPreTraining` / `AlbertModel` from the keys).
    Shapes are checked before anything is assigned, as `load_tf1_checkpoint` does."""
    path = os.fspath(path)
    if architecture is None:
        directory = path if tf.io.gfile.isdir(path) else os.path.dirname(path)
        config_file = os.path.join(directory, CONFIG)
        if fileio.exists(config_file):
            architectures = json.loads(fileio.read_bytes(config_file)).get("architectures")
            architecture = (architectures or [None])[0]
    # A model of the file's class reads its head under its own names.
    heads = model.heads if architecture == getattr(model, "hf_architecture", None) else None
    reader = HuggingFaceReader(path, model.config, architecture, heads)
    reader.check_tied()
    return load_weights(model, reader, path, strict=strict, prefix="")


# ----------------------------------------------------------------------------- writing
def _model_base(architecture: str) -> str:
    """`transformers` saves `AlbertModel` without the `albert.` prefix."""
    return "" if architecture == BASE else "albert."


def hf_state_dict(model) -> tuple[str, dict[str, np.ndarray]]:
    """The model's weights as `transformers` holds them: (its class, key -> array)."""
    architecture = getattr(model, "hf_architecture", None)
    if architecture is None:
        raise CheckpointError(
            f"{model.name} ({type(model).__name__}) has no Hugging Face counterpart; "
            "write its encoder (model.encoder) as an AlbertModel instead")
    config = model.config
    check_group_rule(config, model.name)
    base = _model_base(architecture)
    table = key_table(config, architecture, base, model.heads)
    variables = {tf1_name(v): v for v in model.weights}
    unknown = sorted(n for n in set(variables) - set(table)
                     if not (n.startswith(POOLER) and not hf_class(architecture).pooler))
    if unknown:
        raise CheckpointError(
            f"{model.name} has variables without a {architecture} key: {unknown}")
    tensors = {}
    for name, key in table.items():
        value = np.asarray(variables[name].numpy(), np.float32)
        tensors[key.name] = np.ascontiguousarray(value.T if key.transposed else value)
    if config.embedding_size == config.hidden_size:
        # transformers always maps E -> H; with E = H the original has no mapping.
        mapping = f"{base}encoder.embedding_hidden_mapping_in"
        tensors[f"{mapping}.weight"] = np.eye(config.hidden_size, dtype=np.float32)
        tensors[f"{mapping}.bias"] = np.zeros(config.hidden_size, np.float32)
    return architecture, tensors


def _special_token_ids(spm_model_file, vocab_file) -> dict[str, int]:
    """pad / bos ([CLS]) / eos ([SEP]) ids of the tokenizer, as `transformers` configs
    record them (its defaults 0, 2, 3 are those of Google's SentencePiece models)."""
    ids = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
    if spm_model_file or vocab_file:
        from albert_tf.tokenization import FullTokenizer

        tokenizer = FullTokenizer(vocab_file=vocab_file, spm_model_file=spm_model_file)
        pad = "<pad>" if spm_model_file else "[PAD]"
        found = tokenizer.convert_tokens_to_ids([pad, "[CLS]", "[SEP]"])
        ids = dict(zip(ids, (int(i) for i in found)))
    return ids


def hf_config_dict(model, architecture: str, *, spm_model_file=None, vocab_file=None,
                   labels=None) -> dict:
    """`config.json` for the model: its config, class, tokens and labels."""
    values = model.config.to_hf_dict()
    values["architectures"] = [architecture]
    values.update(_special_token_ids(spm_model_file, vocab_file))
    values["classifier_dropout_prob"] = float(getattr(model, "dropout_rate", 0.1))
    num_labels = getattr(model, "num_labels", None)
    if architecture in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION):
        # transformers sizes these heads by the number of labels.
        labels = list(labels) if labels is not None else [
            f"LABEL_{i}" for i in range(num_labels)]
        if len(labels) != num_labels:
            raise ValueError(f"{len(labels)} labels for a model of {num_labels} outputs")
        values["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        values["label2id"] = {str(label): i for i, label in enumerate(labels)}
        problem_type = getattr(model, "hf_problem_type", None)
        if problem_type is None and num_labels == 1 and architecture == SEQUENCE_CLASSIFICATION:
            problem_type = "regression"
        if problem_type is not None:
            values["problem_type"] = problem_type
    values["dtype"] = "float32"
    return dict(sorted(values.items()))


def _write_tokenizer(directory: str, *, spm_model_file, vocab_file, do_lower_case,
                     max_seq_length) -> None:
    settings = {"do_lower_case": bool(do_lower_case), "model_max_length": max_seq_length}
    if spm_model_file:
        tf.io.gfile.copy(spm_model_file, os.path.join(directory, "spiece.model"))
        settings.update(tokenizer_class="AlbertTokenizer", keep_accents=False,
                        remove_space=True)
    else:
        tf.io.gfile.copy(vocab_file, os.path.join(directory, "vocab.txt"))
        settings.update(tokenizer_class="BertTokenizer", tokenize_chinese_chars=True)
    with tf.io.gfile.GFile(os.path.join(directory, TOKENIZER_CONFIG), "w") as f:
        f.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")


def save_hf_checkpoint(model, directory, *, spm_model_file=None, vocab_file=None,
                       do_lower_case: bool = True, labels=None) -> str:
    """Writes `directory` as `transformers`' `save_pretrained` would for the model's
    counterpart (`AlbertModel`, `AlbertForPreTraining`, `...ForSequenceClassification`,
    `...ForMultipleChoice`, `...ForQuestionAnswering`): `config.json`,
    `model.safetensors` and, given a tokenizer file, `spiece.model` or `vocab.txt` with
    `tokenizer_config.json`. `labels` names a classifier's outputs (`id2label`).

    The directory is written under a temporary name and renamed when complete; it must
    not exist yet (or be empty). Returns it.
    """
    from safetensors.numpy import save

    directory = os.fspath(directory).rstrip("/")
    if tf.io.gfile.isdir(directory):
        if tf.io.gfile.listdir(directory):
            raise FileExistsError(f"{directory} exists and is not empty; not overwritten")
        tf.io.gfile.rmtree(directory)
    architecture, tensors = hf_state_dict(model)
    config = hf_config_dict(model, architecture, spm_model_file=spm_model_file,
                            vocab_file=vocab_file, labels=labels)
    with fileio.atomic_directory(directory) as tmp:
        # "pt": the format transformers expects in the header of what it loads.
        fileio.write_bytes_atomically(os.path.join(tmp, SAFETENSORS),
                                      save(tensors, metadata={"format": "pt"}))
        with tf.io.gfile.GFile(os.path.join(tmp, CONFIG), "w") as f:
            f.write(json.dumps(config, indent=2) + "\n")
        if spm_model_file or vocab_file:
            _write_tokenizer(tmp, spm_model_file=spm_model_file, vocab_file=vocab_file,
                             do_lower_case=do_lower_case,
                             max_seq_length=model.config.max_position_embeddings)
    logging.info("wrote %s (%s, %d tensors)", directory, architecture, len(tensors))
    return directory
