"""`AlbertConfig`: the model hyper-parameters, read from `albert_config.json`.

The field names and JSON layout are those of Google's released `albert_config.json`
files, so a config written for the original TF1 code loads here unchanged and the other
way round. Fields the model does not use (`net_structure_type`, `gap_size`,
`layers_to_keep`, ...) are kept in `extra` and written back by `to_json_string`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import resources
from typing import Any

from albert_tf.errors import UserError

# `gelu` is the tanh approximation, as in the original `modeling.gelu`; `gelu_exact` is
# the erf form (what `transformers` calls "gelu", and its "gelu_new" is our "gelu").
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
# brightmart/albert_zh configs say where the LayerNorms sit: "postln" (BERT's, every
# released checkpoint) or "preln" (only its albert_xxlarge_zh config; no weights exist).
LN_TYPES = ("postln",)


class ConfigError(UserError):
    """An `albert_config.json` (or dict) that the model cannot be built from."""


@dataclasses.dataclass
class AlbertConfig:
    """Hyper-parameters of an ALBERT model; defaults are those of the original class."""

    vocab_size: int
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    down_scale_factor: int = 1
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    # Fields of the JSON file that the model does not read, kept for round trips.
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Where the config came from, for error messages ("" when built in code).
    source: str = dataclasses.field(default="", compare=False, repr=False)

    def __post_init__(self):
        self.validate()

    # ----------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raises `ConfigError` naming the first field that is wrong."""
        where = f" in {self.source}" if self.source else ""
        for field in _INT_FIELDS:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    f"albert config field '{field}'{where} must be an integer, "
                    f"got {type(value).__name__} {value!r}")
            minimum = 0 if field == "down_scale_factor" else 1
            if value < minimum:
                raise ConfigError(
                    f"albert config field '{field}'{where} must be >= {minimum}, "
                    f"got {value}")
        for field in _FLOAT_FIELDS:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(
                    f"albert config field '{field}'{where} must be a number, "
                    f"got {type(value).__name__} {value!r}")
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, field)
            if not 0.0 <= value < 1.0:
                raise ConfigError(
                    f"albert config field '{field}'{where} is a dropout "
                    f"probability and must be in [0, 1), got {value}")
        if not self.initializer_range > 0:
            raise ConfigError(
                f"albert config field 'initializer_range'{where} must be > 0, "
                f"got {self.initializer_range}")
        if not isinstance(self.hidden_act, str):
            raise ConfigError(
                f"albert config field 'hidden_act'{where} must be a string, "
                f"got {type(self.hidden_act).__name__} {self.hidden_act!r}")
        if self.hidden_act.lower() not in ACTIVATIONS:
            raise ConfigError(
                f"albert config field 'hidden_act'{where} is {self.hidden_act!r}; "
                f"known activations: {', '.join(ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"albert config fields 'hidden_size' ({self.hidden_size}) and "
                f"'num_attention_heads' ({self.num_attention_heads}){where}: the "
                "hidden size must be a multiple of the number of heads")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"albert config field 'num_hidden_groups'{where} is "
                f"{self.num_hidden_groups} but there are only "
                f"{self.num_hidden_layers} layers ('num_hidden_layers'); a group "
                "holds the weights of at least one layer")
        if not isinstance(self.extra, dict):
            raise ConfigError(f"AlbertConfig.extra must be a dict, got {self.extra!r}")
        ln_type = self.extra.get("ln_type", "postln")
        if ln_type not in LN_TYPES:
            raise ConfigError(
                f"albert config field 'ln_type'{where} is {ln_type!r}; expected "
                "'postln' (LayerNorm after each residual, as BERT and every released "
                "albert_zh checkpoint). brightmart's 'preln' appears only in its "
                "albert_xxlarge_zh config, for which no weights were released, and is "
                "not supported")

    # ---------------------------------------------------------------- derived
    @property
    def attention_head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def group_index(self, layer_index: int) -> int:
        """The group whose weights layer `layer_index` uses (the original's rule).

        The float arithmetic is the original's too: with e.g. 22 layers in 22 groups it
        maps two layers to one group and never uses `group_21`, and the original
        creates no variables for a group that no layer uses.
        """
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    def used_groups(self) -> list[int]:
        """The groups that some layer uses: those that have variables."""
        return sorted({self.group_index(i) for i in range(self.num_hidden_layers)})

    # ------------------------------------------------------------ (de)serialise
    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "") -> AlbertConfig:
        """Builds a config from the dict of an `albert_config.json`.

        Unknown fields are kept in `extra`; `vocab_size` is required.
        """
        where = f" in {source}" if source else ""
        if not isinstance(values, dict):
            raise ConfigError(
                f"an albert config{where} must be a JSON object, "
                f"got {type(values).__name__}")
        if "vocab_size" not in values:
            raise ConfigError(f"albert config{where} has no 'vocab_size' field")
        known = {f: values[f] for f in _MODEL_FIELDS if f in values}
        extra = {k: v for k, v in values.items() if k not in _MODEL_FIELDS}
        return cls(**known, extra=extra, source=source)

    @classmethod
    def from_hf_dict(cls, values: dict[str, Any], source: str = "") -> AlbertConfig:
        """Builds a config from a Hugging Face `config.json` (`model_type: "albert"`,
        or "bert": a BERT is the ALBERT with one group per layer, one inner group and
        E = H, whose "gelu" is the erf form; `checkpoints.huggingface` reads its
        `encoder.layer.N` weights into group N).

        Its field names are ours; `hidden_act` is translated ("gelu_new" and the other
        tanh forms are our "gelu", its erf "gelu" is our "gelu_exact"), its defaults
        fill what it leaves out, and what our model cannot compute exactly (another
        `layer_norm_eps`, relative position embeddings) is refused. The remaining
        `transformers` fields (token ids, labels, `architectures`) are not kept.
        """
        where = f" in {source}" if source else ""
        model_type = values.get("model_type")
        if model_type not in HF_MODEL_TYPES:
            raise ConfigError(
                f"Hugging Face config{where} has model_type {model_type!r}; expected "
                f"{' or '.join(map(repr, HF_MODEL_TYPES))}")
        bert = model_type == HF_BERT
        act = values.get("hidden_act", "gelu" if bert else "gelu_new")
        if act not in _HF_TO_ACTIVATION:
            raise ConfigError(
                f"Hugging Face config field 'hidden_act'{where} is {act!r}; supported: "
                f"{', '.join(sorted(_HF_TO_ACTIVATION))}")
        eps = values.get("layer_norm_eps", HF_LAYER_NORM_EPS)
        if not isinstance(eps, (int, float)) or abs(eps - HF_LAYER_NORM_EPS) > 1e-15:
            raise ConfigError(
                f"Hugging Face config field 'layer_norm_eps'{where} is {eps!r}; ALBERT's "
                f"LayerNorms use {HF_LAYER_NORM_EPS} and no other value is supported")
        position = values.get("position_embedding_type", "absolute")
        if position != "absolute":
            raise ConfigError(
                f"Hugging Face config field 'position_embedding_type'{where} is "
                f"{position!r}; only 'absolute' (ALBERT's) is supported")
        defaults = _HF_BERT_DEFAULTS if bert else _HF_DEFAULTS
        known = {**defaults, **{f: values[f] for f in _MODEL_FIELDS if f in values}}
        known["hidden_act"] = _HF_TO_ACTIVATION[act]
        if bert:  # a BERT is an ALBERT that shares nothing and maps no E -> H
            known.update(embedding_size=known["hidden_size"],
                         num_hidden_groups=known["num_hidden_layers"], inner_group_num=1)
        return cls(**known, source=source)

    def to_hf_dict(self) -> dict[str, Any]:
        """The fields of a Hugging Face `config.json` for this model (without
        `architectures` and token ids, which depend on the head and the tokenizer)."""
        values = {f: getattr(self, f) for f in _MODEL_FIELDS if f != "down_scale_factor"}
        values["hidden_act"] = _ACTIVATION_TO_HF[self.hidden_act.lower()]
        values.update(model_type="albert", layer_norm_eps=HF_LAYER_NORM_EPS,
                      tie_word_embeddings=True)
        return values

    @classmethod
    def from_keras_hub_dict(cls, values: dict[str, Any], source: str = "") -> AlbertConfig:
        """Builds a config from a keras-hub preset's `config.json` (an `AlbertBackbone`'s
        Keras config). Its model is the original's with the tanh GELU, one dropout
        rate for both of ours and the initializer's stddev 0.02 (which it does not
        record)."""
        where = f" in {source}" if source else ""
        if values.get("class_name") != KERAS_HUB_BACKBONE:
            raise ConfigError(
                f"keras-hub config{where} is of {values.get('class_name')!r}, not of "
                f"ALBERT ({KERAS_HUB_BACKBONE})")
        fields = values.get("config")
        if not isinstance(fields, dict):
            raise ConfigError(f"keras-hub config{where} has no 'config' object")
        missing = [k for k in _KERAS_HUB_REQUIRED if k not in fields]
        if missing:
            raise ConfigError(f"keras-hub config{where} has no {', '.join(missing)}")
        known = {ours: fields[theirs] for ours, theirs in _KERAS_HUB_FIELDS.items()
                 if theirs in fields}
        dropout = fields.get("dropout", 0.0)
        return cls(**known, hidden_act="gelu", hidden_dropout_prob=dropout,
                   attention_probs_dropout_prob=dropout, initializer_range=0.02,
                   source=source)

    def to_keras_hub_dict(self) -> dict[str, Any]:
        """The fields of keras-hub's `AlbertBackbone` config for this model; raises
        `ConfigError` for what it cannot compute (another activation, layers not
        divisible into the groups), and takes `hidden_dropout_prob` as its one dropout
        rate."""
        where = f" ({self.source})" if self.source else ""
        if self.hidden_act.lower() != "gelu":
            raise ConfigError(
                f"hidden_act{where} is {self.hidden_act!r}; keras-hub's "
                f"{KERAS_HUB_BACKBONE} has the original's tanh GELU ('gelu') only")
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ConfigError(
                f"keras-hub's {KERAS_HUB_BACKBONE} needs num_hidden_layers "
                f"({self.num_hidden_layers}){where} divisible by num_hidden_groups "
                f"({self.num_hidden_groups})")
        values = {theirs: getattr(self, ours) for ours, theirs in _KERAS_HUB_FIELDS.items()}
        values["dropout"] = self.hidden_dropout_prob
        return values

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> AlbertConfig:
        """Reads an `albert_config.json` (local path or any `tf.io.gfile` URL), a
        Hugging Face `config.json` (recognized by its `model_type`), a keras-hub
        preset's (by its `registered_name`), or the model config inside a `.keras` file
        of an albert_tf model (`read_keras_file_config`)."""
        path = os.fspath(path)
        if path.endswith(KERAS_FILE_SUFFIX):
            return cls.from_dict(read_keras_file_config(path)["config"]["config"],
                                 source=path)
        text = _read_text(path)
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"{path} is not valid JSON: {e.msg} at line {e.lineno}, "
                f"column {e.colno}") from None
        if isinstance(values, dict) and "model_type" in values:
            return cls.from_hf_dict(values, source=path)
        if keras_hub_class(values) is not None:
            return cls.from_keras_hub_dict(values, source=path)
        return cls.from_dict(values, source=path)

    @classmethod
    def from_name(cls, name: str) -> AlbertConfig:
        """The shipped config of a released model, e.g. `albert_base_v2`."""
        names = available_configs()
        if name not in names:
            raise ConfigError(
                f"no shipped albert config named {name!r}; available: "
                f"{', '.join(names)}")
        path = _configs_dir().joinpath(name + ".json")
        return cls.from_dict(json.loads(path.read_text()), source=f"configs/{name}.json")

    @classmethod
    def from_name_or_file(cls, name_or_path: str | os.PathLike) -> AlbertConfig:
        """A shipped config name, or else the path of a JSON file (what every script's
        `--albert_config_file` takes); the error for neither lists the shipped names."""
        value = os.fspath(name_or_path)
        names = available_configs()
        if value in names:
            return cls.from_name(value)
        if not _exists(value):
            raise ConfigError(
                f"albert config file {value} does not exist, and it is not the name of a "
                f"shipped config either ({', '.join(names)})")
        return cls.from_json_file(value)

    def to_dict(self) -> dict[str, Any]:
        """The fields of `albert_config.json`: model fields plus the kept extras."""
        values = dict(self.extra)
        values.update({f: getattr(self, f) for f in _MODEL_FIELDS})
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        # Imported late so that reading configs does not import TensorFlow.
        from albert_tf.fileio import write_text_atomically

        write_text_atomically(path, self.to_json_string())

    def replace(self, **changes: Any) -> AlbertConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


# Hugging Face `config.json`: its `hidden_act` names (ACT2FN of transformers) for our
# activations, the LayerNorm epsilon of every ALBERT, and the defaults of its
# `AlbertConfig` where they differ from ours (transformers/models/albert).
_HF_TO_ACTIVATION = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                     "gelu": "gelu_exact", "relu": "relu", "tanh": "tanh",
                     "linear": "linear"}
_ACTIVATION_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu",
                     "tanh": "tanh", "linear": "linear"}
HF_LAYER_NORM_EPS = 1e-12
_HF_DEFAULTS = {"vocab_size": 30000}
# `model_type` of the Hugging Face configs read here; BERT's `BertConfig` defaults (what
# its config.json may leave out) are those of bert-base-uncased.
HF_ALBERT, HF_BERT = "albert", "bert"
HF_MODEL_TYPES = (HF_ALBERT, HF_BERT)
_HF_BERT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
                     "num_attention_heads": 12, "intermediate_size": 3072,
                     "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                     "max_position_embeddings": 512, "type_vocab_size": 2,
                     "initializer_range": 0.02}

# keras-hub's ALBERT (`keras_hub.models.AlbertBackbone`): our field -> its argument.
KERAS_HUB_BACKBONE = "AlbertBackbone"
_KERAS_HUB_FIELDS = {
    "vocab_size": "vocabulary_size", "embedding_size": "embedding_dim",
    "hidden_size": "hidden_dim", "num_hidden_layers": "num_layers",
    "num_hidden_groups": "num_groups", "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_dim", "inner_group_num": "num_inner_repetitions",
    "max_position_embeddings": "max_sequence_length", "type_vocab_size": "num_segments"}


def keras_hub_class(values) -> str | None:
    """The class a keras-hub `config.json` (its parsed JSON) names (`AlbertBackbone`,
    `BertBackbone`, ...); None for JSON that is not a keras-hub config."""
    if not isinstance(values, dict):
        return None
    registered = str(values.get("registered_name") or "")
    if registered.startswith("keras_hub>") or str(values.get("module", "")).startswith(
            "keras_hub."):
        return str(values.get("class_name") or registered.partition(">")[2])
    return None


_KERAS_HUB_REQUIRED = ("vocabulary_size", "num_layers", "num_heads", "embedding_dim",
                       "hidden_dim", "intermediate_dim")  # and hidden_act "gelu_new", read above

_MODEL_FIELDS = tuple(
    f.name for f in dataclasses.fields(AlbertConfig) if f.name not in ("extra", "source"))
_INT_FIELDS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
    "num_hidden_groups", "num_attention_heads", "intermediate_size",
    "inner_group_num", "down_scale_factor", "max_position_embeddings",
    "type_vocab_size")
_FLOAT_FIELDS = (
    "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def _configs_dir():
    return resources.files("albert_tf").joinpath("configs")


def available_configs() -> list[str]:
    """Names of the shipped configs (`albert_base_v2`, `albert_base_zh`, ...)."""
    return sorted(
        entry.name[: -len(".json")]
        for entry in _configs_dir().iterdir()
        if entry.name.endswith(".json"))


def _exists(path: str) -> bool:
    if "://" in path:  # gs://, ...: through tf.io.gfile, imported only for them
        from albert_tf import fileio

        return fileio.exists(path)
    return os.path.exists(path)


# Keras' own file of a model (`model.save("m.keras")`): a zip whose config.json is the
# model's Keras config; an albert_tf model's is registered as `albert_tf>Name` (a task
# module's under its module's name: `albert_tf.modeling.common.serializable`), and holds
# the `AlbertConfig` as its "config".
KERAS_FILE_SUFFIX = ".keras"


def read_keras_file_values(path: str) -> dict:
    """The Keras config of any model's `.keras` file (its `registered_name` names the
    model's class); `ConfigError` naming the file for one that is not a .keras file."""
    import zipfile

    if not _exists(path):
        raise ConfigError(f"no Keras file at {path}: file does not exist")
    try:
        from albert_tf import fileio

        with fileio.open_binary(path) as f, zipfile.ZipFile(f) as archive:
            values = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise ConfigError(f"{path} is not a Keras .keras file ({e})") from None
    return values


def read_keras_file_config(path: str) -> dict:
    """The Keras config of an albert_tf model's `.keras` file; `ConfigError` naming the
    file for one that is not a .keras file, or holds another package's model."""
    values = read_keras_file_values(path)
    config = values.get("config") if isinstance(values, dict) else None
    if not (isinstance(config, dict) and isinstance(config.get("config"), dict)
            and "vocab_size" in config["config"]):
        held = values.get("registered_name") if isinstance(values, dict) else None
        held = held or (f"{values.get('module')}.{values.get('class_name')}"
                        if isinstance(values, dict) else "something else")
        raise ConfigError(
            f"{path} is a .keras file of {held}, not of an albert_tf model; albert_tf "
            "reads the .keras files of its own models (AlbertEncoder, AlbertClassifier, "
            "...)")
    return values


def _read_text(path: str) -> str:
    if not _exists(path):
        raise ConfigError(f"albert config file {path} does not exist")
    if "://" in path:
        from albert_tf import fileio

        return fileio.read_bytes(path).decode("utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()
