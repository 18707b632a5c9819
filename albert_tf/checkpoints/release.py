"""Release directories of every layout: find their files, load their weights.

`AlbertModel.from_release(directory)` and the scripts' `--init_checkpoint` read five
layouts, told apart by their files (nothing here downloads; a directory must be on
disk or on a `tf.io.gfile` file system):

- Google's (`albert_base/` of `albert_base_v2.tar.gz`): `albert_config.json`,
  `30k-clean.model`, `model.ckpt-best.*` (the Chinese models: `vocab_chinese.txt`;
  a TF-Hub module: `assets/` and `variables/variables.*`).
- brightmart/albert_zh's (`albert_tiny_zh/`): `albert_config_<size>.json`,
  `albert_model.ckpt.*`, `vocab.txt`; recognized by its variable names, and read as the
  equivalent Google layout (`albert_tf.checkpoints.brightmart`). Its `checkpoint` file may name a
  path on its authors' machine: then the one `*.index` of the directory is used.
- Hugging Face (`save_pretrained`): `config.json` with `model_type: "albert"`,
  `model.safetensors`, `spiece.model` or `vocab.txt`, `tokenizer_config.json`.
- keras-hub presets (`save_to_preset`): `config.json` of `keras_hub>AlbertBackbone`,
  `model.weights.h5`, `assets/tokenizer/vocabulary.spm`, and a task's `task.json`
  and `task.weights.h5` (`albert_tf.checkpoints.keras_hub_preset`).
- Keras' own file of an albert_tf model (`model.save("m.keras")`), with the tokenizer
  files beside it (`albert_tf.checkpoints.keras_file`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import tensorflow as tf
from absl import logging

from albert_tf import fileio, task_heads
from albert_tf.checkpoints import brightmart, huggingface, keras_file, keras_hub_preset
from albert_tf.checkpoints.tf1 import (
    CheckpointError,
    LoadReport,
    load_tf1_checkpoint,
    open_reader,
    resolve_checkpoint,
    tf1_reader,
)
from albert_tf.config import AlbertConfig, read_keras_file_config


@dataclasses.dataclass
class ReleaseFiles:
    """The files of a release (`config_file`, `spm_model_file`, `vocab_file` may be
    None where the directory has none). `layout` is "google", "brightmart",
    "huggingface", "keras_hub" or "keras"; `checkpoint` a TF1 prefix, a safetensors file
    (or shard index), a keras-hub preset's directory or a `.keras` file;
    `do_lower_case` what `tokenizer_config.json` says, None where nothing does."""

    directory: str
    config_file: str | None
    checkpoint: str
    spm_model_file: str | None
    vocab_file: str | None
    layout: str = "google"
    do_lower_case: bool | None = None

    def load_config(self) -> AlbertConfig:
        """The config of the model these weights load into (brightmart's converted to
        its Google-layout equivalent)."""
        if self.config_file is None:
            raise CheckpointError(f"no albert config found in {self.directory}")
        return layout_config(AlbertConfig.from_json_file(self.config_file), self.layout)

    def tokenizer(self):
        """The release's Python tokenizer (`FullTokenizer`)."""
        from albert_tf.tokenization import FullTokenizer

        if not (self.spm_model_file or self.vocab_file):
            raise CheckpointError(f"no spiece/30k-clean .model or vocab*.txt in {self.directory}")
        lower = True if self.do_lower_case is None else self.do_lower_case
        return FullTokenizer(vocab_file=None if self.spm_model_file else self.vocab_file,
                             do_lower_case=lower, spm_model_file=self.spm_model_file)


# The layout of a SavedModel export's files (`albert_tf.export.base.describe_export`).
SAVEDMODEL = "savedmodel"


def _glob_one(directory: str, patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        found = sorted(tf.io.gfile.glob(os.path.join(directory, pattern)))
        if found:
            return found[0]
    return None


_SPM_PATTERNS = ("*.model", "assets/*.model")
_VOCAB_PATTERNS = ("vocab*.txt", "assets/vocab*.txt", "*.vocab", "assets/*.vocab")


def tokenizer_files(directory: str) -> tuple[str | None, str | None]:
    """The SentencePiece model and the WordPiece vocabulary found in `directory` (or
    its assets/), each None where there is none."""
    return _glob_one(directory, _SPM_PATTERNS), _glob_one(directory, _VOCAB_PATTERNS)
_TF1_CONFIG_PATTERNS = ("albert_config.json", "assets/albert_config.json",
                        "albert_config*.json", "*config*.json")


def _keras_hub_files(directory: str) -> ReleaseFiles:
    keras_hub_preset.check_preset(directory)
    spm = os.path.join(directory, keras_hub_preset.VOCABULARY_SPM)
    vocab = os.path.join(directory, keras_hub_preset.VOCABULARY_TXT)
    return ReleaseFiles(
        directory=directory, layout="keras_hub", checkpoint=directory,
        config_file=os.path.join(directory, keras_hub_preset.CONFIG),
        spm_model_file=spm if fileio.exists(spm) else None,
        vocab_file=vocab if fileio.exists(vocab) else None)


def _is_hf_directory(directory: str) -> bool:
    if any(fileio.exists(os.path.join(directory, name)) for name in (
            huggingface.SAFETENSORS, huggingface.SAFETENSORS_INDEX)):
        return True
    config = os.path.join(directory, huggingface.CONFIG)
    if not fileio.exists(config):
        return False
    try:
        return "model_type" in json.loads(fileio.read_bytes(config))
    except ValueError:
        return False


def _hf_files(directory: str, checkpoint: str | None = None) -> ReleaseFiles:
    if checkpoint is None:
        found = [os.path.join(directory, n) for n in (
            huggingface.SAFETENSORS_INDEX, huggingface.SAFETENSORS)]
        found = [f for f in found if fileio.exists(f)]
        if not found:
            huggingface.refuse_other_weights(directory)  # a pickle: says how to convert
            raise CheckpointError(
                f"Hugging Face directory {directory} has no {huggingface.SAFETENSORS}")
        checkpoint = found[0]
    config = os.path.join(directory, huggingface.CONFIG)
    do_lower_case = None
    tokenizer_config = os.path.join(directory, huggingface.TOKENIZER_CONFIG)
    if fileio.exists(tokenizer_config):
        value = json.loads(fileio.read_bytes(tokenizer_config)).get("do_lower_case")
        do_lower_case = None if value is None else bool(value)
    spm = os.path.join(directory, "spiece.model")
    return ReleaseFiles(
        directory=directory, layout="huggingface", checkpoint=checkpoint,
        config_file=config if fileio.exists(config) else None,
        spm_model_file=spm if fileio.exists(spm) else _glob_one(directory, ("*.model",)),
        vocab_file=_glob_one(directory, ("vocab.txt", "vocab*.txt")),
        do_lower_case=do_lower_case)


# Every ALBERT checkpoint of Google's layout has its transformer here (under a leading
# scope such as TF-Hub's `module/`).
_GOOGLE_MARK = "bert/encoder/transformer/group_"


def tf1_layout(checkpoint: str, names) -> str:
    """"google" or "brightmart" for the TF1 checkpoint names; raises for any other."""
    if brightmart.is_brightmart(names):
        return "brightmart"
    if any(_GOOGLE_MARK in n for n in names):
        return "google"
    hint = ""
    if any("bert/encoder/layer_0/" in n for n in names):
        hint = " It looks like a BERT checkpoint (one set of weights per layer)."
    elif "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
        hint = (" It is an object-based checkpoint (a training run's ckpt-N, kept for "
                "resuming): use the run's model.ckpt-* or model.ckpt-best instead.")
    raise CheckpointError(
        f"{checkpoint} is not an ALBERT checkpoint of a known layout: expected Google's "
        f"names ({_GOOGLE_MARK}0/...) or brightmart/albert_zh's "
        f"(bert/encoder/layer_shared/...); its names look like {sorted(names)[:3]}.{hint}")


# The TF1 checkpoints a training run keeps beside its object-based ckpt-N: the best on
# dev (fine-tuning), and the weights of its last step (`model.ckpt-<step>`).
_RUN_BEST = "model.ckpt-best"
_RUN_STEP = re.compile(r"model\.ckpt-(\d+)\.index$")


def _kept_tf1_checkpoint(directory: str) -> str | None:
    """The TF1 checkpoint a training run kept in `directory` beside its object-based
    ckpt-N (which are for resuming): `model.ckpt-best`, else the newest
    `model.ckpt-<step>`; None where it kept none."""
    best = os.path.join(directory, _RUN_BEST)
    if tf.io.gfile.exists(best + ".index"):
        return best
    steps = [int(m.group(1)) for name in tf.io.gfile.listdir(directory)
             if (m := _RUN_STEP.match(name))]
    return os.path.join(directory, f"model.ckpt-{max(steps)}") if steps else None


def _tf1_files(directory: str, checkpoint: str, *, run_directory: bool = False
               ) -> ReleaseFiles:
    """The files of a TF1 checkpoint. With `run_directory` (a directory was named), a
    training run's object-based ckpt-N gives way to the TF1 checkpoint the run kept
    (its output_dir as --init_checkpoint: pretraining, then fine-tuning)."""
    names = tf1_reader(checkpoint).get_variable_to_shape_map()
    if run_directory and "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
        kept = _kept_tf1_checkpoint(directory)
        if kept is not None:  # else tf1_layout says what the directory holds
            logging.info("%s: the run's TF1 checkpoint %s (its %s is kept for resuming)",
                         directory, kept, os.path.basename(checkpoint))
            checkpoint, names = kept, tf1_reader(kept).get_variable_to_shape_map()
    return ReleaseFiles(
        directory=directory, layout=tf1_layout(checkpoint, names), checkpoint=checkpoint,
        config_file=_glob_one(directory, _TF1_CONFIG_PATTERNS),
        spm_model_file=_glob_one(directory, _SPM_PATTERNS),
        vocab_file=_glob_one(directory, _VOCAB_PATTERNS))


def layout_config(config: AlbertConfig, layout: str) -> AlbertConfig:
    """The config of the model that weights of `layout` load into, from the config
    released with them: brightmart's as its Google-layout equivalent
    (`brightmart.google_config`), Google's and Hugging Face's as they are."""
    return brightmart.google_config(config) if layout == "brightmart" else config


def describe_checkpoint(path: str | os.PathLike) -> ReleaseFiles:
    """The layout and files of what `path` names: a release directory of any layout, a
    TF1 checkpoint prefix or file, or a `model.safetensors` (or shard index). Config
    and tokenizer files are those found beside the weights (None where there are
    none)."""
    path = os.fspath(path).rstrip("/") or "/"
    if tf.io.gfile.isdir(path):
        if keras_hub_preset.preset_class(path) is not None:
            return _keras_hub_files(path)
        if _is_hf_directory(path):
            return _hf_files(path)
        huggingface.refuse_other_weights(path)
        return _tf1_files(path, resolve_checkpoint(path), run_directory=True)
    base = os.path.basename(path)
    if keras_file.is_keras_file(path):
        directory = os.path.dirname(path) or "."
        return ReleaseFiles(
            directory=directory, layout="keras", checkpoint=path, config_file=path,
            spm_model_file=_glob_one(directory, _SPM_PATTERNS),
            vocab_file=_glob_one(directory, _VOCAB_PATTERNS))
    if base == keras_hub_preset.WEIGHTS:
        return _keras_hub_files(os.path.dirname(path) or ".")
    if base.endswith(".safetensors") or base == huggingface.SAFETENSORS_INDEX:
        if not fileio.exists(path):
            raise CheckpointError(f"no Hugging Face weights at {path}: file does not exist")
        return _hf_files(os.path.dirname(path) or ".", checkpoint=path)
    if base in huggingface.PICKLES or base in huggingface.OTHER_WEIGHTS:
        huggingface.refuse_other_weights(os.path.dirname(path) or ".")
    checkpoint = resolve_checkpoint(path)
    return _tf1_files(os.path.dirname(checkpoint) or ".", checkpoint)


def find_release_files(directory: str | os.PathLike) -> ReleaseFiles:
    """Locates config, checkpoint and tokenizer files in a release directory of any
    layout; the config must be there."""
    directory = os.fspath(directory)
    if not (tf.io.gfile.isdir(directory) or keras_file.is_keras_file(directory)):
        raise CheckpointError(f"release directory {directory} does not exist")
    files = describe_checkpoint(directory)
    if files.config_file is None:
        expected = ("config.json" if files.layout == "huggingface"
                    else "albert_config.json (or albert_config_<size>.json)")
        raise CheckpointError(f"release directory {directory} has no {expected}")
    return files


def load_checkpoint(model, path, *, strict: bool = False) -> LoadReport:
    """Loads weights of any layout into `model` (see the module's docstring): `path` is
    what `describe_checkpoint` takes, or its `ReleaseFiles`. The report's `layout` says
    which was read, `missing` and `unused` what did not match."""
    files = path if isinstance(path, ReleaseFiles) else describe_checkpoint(path)
    if files.layout == "huggingface":
        return huggingface.load_hf_checkpoint(model, files.checkpoint, strict=strict)
    if files.layout == "keras_hub":
        return keras_hub_preset.load_keras_hub_checkpoint(model, files.checkpoint,
                                                          strict=strict)
    if files.layout == "keras":
        return keras_file.load_keras_file(model, files.checkpoint, strict=strict)
    return load_tf1_checkpoint(model, files.checkpoint, strict=strict)


def load_model(model_class, directory, *, strict: bool | None = None, **kwargs):
    """`model_class` (an `AlbertModel` subclass) built from a release directory's config
    and its weights loaded: `model_class.from_release(directory)`. `strict` (default:
    the class's `release_strict`): every weight must come from the checkpoint. A class
    that does not ask for that (a task model, `release_strict = False`) still needs
    every encoder weight (the pooler where the model reads it): only its task head may
    be missing, as a pretraining release has none. Task arguments (e.g.
    `num_labels`) go in `kwargs`. The load report (its `layout` says which was read) is
    kept as `model.load_report`, the files as `model.release_files`."""
    files = find_release_files(directory)
    config = files.load_config()
    kwargs = {**_held_arguments(files, model_class, config, kwargs), **kwargs}
    model = model_class(config, **kwargs)
    strict = model_class.release_strict if strict is None else strict
    model.load_report = load_checkpoint(model, files, strict=strict)
    model.release_files = files
    if model_class.release_strict:
        return model
    missing = [n for n in model.load_report.missing if n.startswith("bert/") and (
        model.reads_pooled_output or not n.startswith("bert/pooler/"))]
    if missing:
        raise CheckpointError(
            f"checkpoint {model.load_report.checkpoint} lacks {len(missing)} encoder "
            "variables of " + model.name + ":\n" + "\n".join(f"  {n}" for n in missing))
    return model


def _held_arguments(files: ReleaseFiles, model_class, config: AlbertConfig,
                    given) -> dict:
    """The model's arguments that the release holds, where not `given`: a `.keras` file
    every one of its model's (`num_labels`, `threshold`, ...), another layout the
    number of outputs of its head (`outputs_argument`: `num_labels`), where it has
    one."""
    import inspect

    accepted = inspect.signature(model_class.__init__).parameters
    if files.layout == "keras":
        held = read_keras_file_config(files.checkpoint)["config"]
        return {name: value for name, value in held.items()
                if name in accepted and name not in ("config", "name", "dtype", "seed")
                and name not in given}
    argument = model_class.outputs_argument
    if argument is None or argument in given or argument not in accepted:
        return {}
    count = head_outputs(files, model_class, config)
    return {} if count is None else {argument: count}


def weight_shapes(files: ReleaseFiles, architecture: str | None = None,
                  heads=None) -> dict[str, list[int]]:
    """The weights of `files` by TF1 name (Google's layout) with their shapes; for a
    Hugging Face directory as read for `architecture` (default: its config's), its head
    under the names of `heads` (default: the class's; `task_heads`)."""
    if files.layout == "huggingface":
        if architecture is None and files.config_file:
            raw = json.loads(fileio.read_bytes(files.config_file))
            architecture = (raw.get("architectures") or [None])[0]
        reader = huggingface.HuggingFaceReader(files.checkpoint, files.load_config(),
                                               architecture, heads)
    elif files.layout == "keras_hub":
        reader = keras_hub_preset.KerasHubReader(files.checkpoint, files.load_config())
    elif files.layout == "keras":
        reader = keras_file.KerasFileReader(files.checkpoint)
    else:
        reader = open_reader(files.checkpoint)
    return reader.get_variable_to_shape_map()


def head_outputs(files: ReleaseFiles, model_class, config: AlbertConfig) -> int | None:
    """The number of outputs of the first head of `model_class` (its
    `outputs_argument`, such as `num_labels`) in the weights of `files`: the size of
    the axis that the head's table sizes by them; None where the model takes no such
    argument, or the head is absent."""
    if model_class.outputs_argument is None or not model_class.heads:
        return None
    head = model_class.heads[0]
    return task_heads.num_outputs(head, config, weight_shapes(
        files, model_class.hf_architecture, model_class.heads))
