"""TF1 name-based checkpoints: load Google's releases by name, save in the same form.

A Keras model of this package holds its weights under variable paths that are the
original TF1 names (`bert/encoder/transformer/group_0/inner_group_0/...`), so loading is
matching names, and saving writes those names back for the original code and for
anyone else's converter.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.checkpoints import brightmart
from albert_tf.errors import UserError

# Optimizer and bookkeeping state in training checkpoints: never model weights.
_TRAINING_STATE_LEAVES = frozenset({
    "adam_m", "adam_v", "lamb_m", "lamb_v",  # the original's AdamW / LAMB slots
    "Adam", "Adam_1", "Momentum", "beta1_power", "beta2_power",  # tf.train optimizers
    "global_step", "_CHECKPOINTABLE_OBJECT_GRAPH",
})


LAYOUT_DESCRIPTIONS = {
    "google": "Google's TF1 names",
    "brightmart": "brightmart/albert_zh TF1 names, read as the equivalent Google "
                  "layout with embedding_size = hidden_size",
    "huggingface": "Hugging Face safetensors",
    "keras_hub": "a keras-hub preset's Keras weights",
    "keras": "an albert_tf model's .keras file",
}


class CheckpointError(UserError):
    """A checkpoint that is missing, unreadable or does not fit the model."""


def is_training_state(name: str) -> bool:
    """True for optimizer slots, `global_step` and other non-weight entries."""
    leaf = name.rsplit("/", 1)[-1]
    return leaf in _TRAINING_STATE_LEAVES or "Optimizer" in name or "OPTIMIZER" in name


def resolve_checkpoint(path: str | os.PathLike) -> str:
    """The checkpoint prefix that `path` names.

    `path` may be a prefix (`.../model.ckpt-best`), one of its files (`.index`,
    `.data-*`, `.meta`), a directory with a `checkpoint` state file, a directory holding
    exactly one `*.index`, or a SavedModel / TF-Hub module directory
    (`variables/variables`).
    """
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        if tf.io.gfile.exists(os.path.join(path, "checkpoint")):
            latest = tf.train.latest_checkpoint(path)
            if latest:
                return latest
        indexes = sorted(tf.io.gfile.glob(os.path.join(path, "*.index")))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        if len(indexes) > 1:
            names = ", ".join(os.path.basename(i) for i in indexes)
            raise CheckpointError(
                f"{path} holds several checkpoints ({names}) and no 'checkpoint' file "
                "says which is the latest: pass the prefix of one, e.g. "
                f"{indexes[-1][: -len('.index')]}")
        hub = os.path.join(path, "variables", "variables")
        if tf.io.gfile.exists(hub + ".index"):
            return hub
        raise CheckpointError(
            f"no TF1 checkpoint in directory {path}: expected a 'checkpoint' file, one "
            "*.index file, or variables/variables.index")
    prefix = path
    for suffix in (".index", ".meta"):
        if prefix.endswith(suffix):
            prefix = prefix[: -len(suffix)]
    if ".data-" in os.path.basename(prefix):
        prefix = prefix[: prefix.rindex(".data-")]
    if not tf.io.gfile.exists(prefix + ".index"):
        raise CheckpointError(
            f"no checkpoint at {path}: {prefix}.index does not exist")
    return prefix


def tf1_reader(prefix: str):
    """`tf.train.load_checkpoint(prefix)`, its errors as one `CheckpointError` line."""
    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        message = getattr(e, "message", None) or str(e)
        raise CheckpointError(
            f"cannot read checkpoint {prefix} (corrupt or not a TF checkpoint): "
            f"{message.strip().splitlines()[0]}") from None


def open_reader(prefix: str):
    """A reader of the TF1 checkpoint at `prefix` (as `tf.train.load_checkpoint`), under
    Google's names: a brightmart/albert_zh checkpoint is shown as its exact Google-layout
    equivalent (`albert_tf.checkpoints.brightmart`). Its `layout` says which was read."""
    reader = tf1_reader(prefix)
    if brightmart.is_brightmart(reader.get_variable_to_shape_map()):
        return brightmart.BrightmartReader(reader)
    return reader


def layout_of(reader) -> str:
    """The layout a reader shows (a `LAYOUT_DESCRIPTIONS` key)."""
    return getattr(reader, "layout", "google")


def list_checkpoint_variables(path) -> dict[str, list[int]]:
    """Every name in the TF1 checkpoint at `path` with its shape, as stored."""
    return dict(tf1_reader(resolve_checkpoint(path)).get_variable_to_shape_map())


def tf1_name(variable) -> str:
    """The TF1 checkpoint name of a model variable: its Keras path."""
    return variable.path


def _model_variables(model) -> dict[str, object]:
    variables: dict[str, object] = {}
    for variable in model.weights:
        name = tf1_name(variable)
        if name in variables and variables[name] is not variable:
            raise CheckpointError(
                f"two variables of {model.name} share the name {name!r}: a TF1 "
                "checkpoint cannot hold both")
        variables[name] = variable
    return variables


def _detect_prefix(checkpoint_names: list[str], model_names: set[str]) -> str:
    """The leading scope (e.g. `module/`) that, stripped, matches most model names."""
    counts = collections.Counter()
    for name in checkpoint_names:
        if name in model_names:
            counts[""] += 1
        start = name.find("/")
        while start != -1:
            if name[start + 1:] in model_names:
                counts[name[: start + 1]] += 1
            start = name.find("/", start + 1)
    if not counts:
        return ""
    # Ties go to the shorter prefix, so a checkpoint that matches directly wins.
    return max(counts, key=lambda p: (counts[p], -len(p)))


@dataclasses.dataclass
class LoadReport:
    """What `load_tf1_checkpoint` did: model names loaded or missing, checkpoint names
    not used, optimizer/bookkeeping entries skipped, and the leading scope stripped."""

    checkpoint: str
    prefix: str
    loaded: list[str]
    missing: list[str]
    unused: list[str]
    skipped: list[str]
    # With `optimizer=`: the optimizer entries (`<name>/adam_m`, `<name>/adam_v`,
    # `global_step`) assigned, and those the checkpoint lacks.
    optimizer_loaded: list[str] = dataclasses.field(default_factory=list)
    optimizer_missing: list[str] = dataclasses.field(default_factory=list)
    # Whose names the checkpoint has: "google" (TF1, Google's), "brightmart" (TF1,
    # albert_zh's, read as its Google-layout equivalent), "huggingface" (safetensors) or
    # "keras_hub" (a preset's .weights.h5) or "keras" (a model's .keras file).
    # `unused` lists the checkpoint's own names.
    layout: str = "google"

    def __str__(self) -> str:
        lines = [
            f"checkpoint {self.checkpoint} ({LAYOUT_DESCRIPTIONS[self.layout]})"
            + (f" (scope {self.prefix!r} stripped)" if self.prefix else ""),
            f"  loaded {len(self.loaded)} variables",
            f"  missing {len(self.missing)} (kept their initial values)"
            + "".join(f"\n    {n}" for n in self.missing),
            f"  unused {len(self.unused)} checkpoint variables"
            + "".join(f"\n    {n}" for n in self.unused),
            f"  skipped {len(self.skipped)} optimizer / step entries",
        ]
        if self.optimizer_loaded or self.optimizer_missing:
            lines.append(
                f"  optimizer: loaded {len(self.optimizer_loaded)} entries, missing "
                f"{len(self.optimizer_missing)} (kept their values)"
                + "".join(f"\n    {n}" for n in self.optimizer_missing))
        return "\n".join(lines)


def _optimizer_variables(optimizer, model) -> dict[str, object]:
    """The optimizer's state by TF1 name, as the optimizer itself names it.

    Any optimizer with a `tf1_variables(model)` method fits (the AdamWeightDecay and
    Lamb of `albert_tf.training.optimizers` have one): the optimizer knows its slots,
    so this module needs no knowledge of training. Keras wrappers that hold the real
    optimizer as `inner_optimizer` (`LossScaleOptimizer`) are looked through.
    """
    inner = optimizer
    while not hasattr(inner, "tf1_variables") and hasattr(inner, "inner_optimizer"):
        inner = inner.inner_optimizer
    if not hasattr(inner, "tf1_variables"):
        raise TypeError(
            "TF1 optimizer state (adam_m / adam_v, global_step) needs an optimizer that "
            "names its slots with tf1_variables(model), such as albert_tf.training's "
            f"AdamWeightDecay or Lamb, not {type(inner).__name__}")
    return inner.tf1_variables(model)


@dataclasses.dataclass
class _Match:
    """Variables matched against a checkpoint: the entry each one reads (`sources`,
    in variable order), the names the checkpoint lacks, and one line per variable
    whose shape or dtype differs from its entry."""

    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    missing: list[str] = dataclasses.field(default_factory=list)
    mismatched: list[str] = dataclasses.field(default_factory=list)


def _match_model_variables(variables, by_model_name, shapes, dtypes) -> _Match:
    match = _Match()
    for name, variable in variables.items():
        source = by_model_name.get(name)
        if source is None:
            match.missing.append(name)
        elif tuple(shapes[source]) != tuple(variable.shape):
            match.mismatched.append(
                f"  {name}: model {list(variable.shape)}, checkpoint {list(shapes[source])}")
        elif not dtypes[source].is_floating and keras.backend.is_float_dtype(variable.dtype):
            match.mismatched.append(
                f"  {name}: model {variable.dtype}, checkpoint {dtypes[source].name}")
        else:
            match.sources[name] = source
    return match


def _match_optimizer_variables(variables, prefix: str, shapes) -> _Match:
    """Optimizer entries are training state under the model's leading scope; the step
    may also sit at the top level."""
    match = _Match()
    for name, variable in variables.items():
        source = next((n for n in (prefix + name, name) if n in shapes), None)
        if source is None:
            match.missing.append(name)
        elif tuple(shapes[source]) != tuple(variable.shape):
            match.mismatched.append(
                f"  {name}: optimizer {list(variable.shape)}, checkpoint "
                f"{list(shapes[source])}")
        else:
            match.sources[name] = source
    return match


def _check_fit(checkpoint: str, model, variables, candidates, weights: _Match,
               slots: _Match, strict: bool, hint: str = "") -> None:
    """Raises before anything is assigned: mismatches, no overlap, or (strict) gaps."""
    mismatched = weights.mismatched + slots.mismatched
    if mismatched:
        raise CheckpointError(
            f"checkpoint {checkpoint} does not fit {model.name}: "
            f"{len(mismatched)} variables differ (a checkpoint of another model size, "
            "or the wrong config?)\n" + "\n".join(mismatched) + hint)
    if not weights.sources:
        raise CheckpointError(
            f"checkpoint {checkpoint} holds none of the {len(variables)} variables of "
            f"{model.name} (e.g. {next(iter(variables))!r}); its names look like "
            f"{candidates[:3]}")
    missing = weights.missing + slots.missing
    if strict and missing:
        raise CheckpointError(
            f"checkpoint {checkpoint} lacks {len(missing)} variables that {model.name}"
            + (" and its optimizer need" if slots.missing else " needs")
            + " (strict=True):\n" + "\n".join(f"  {n}" for n in missing))


def _read_and_assign(reader, checkpoint: str, targets) -> None:
    """Assigns each `(variable, checkpoint name)` of `targets`. Everything is read
    first: a corrupt data file must not leave the model half loaded."""
    values = []
    for _, source in targets:
        try:
            values.append(reader.get_tensor(source))
        except (tf.errors.OpError, ValueError, IndexError) as e:
            message = getattr(e, "message", None) or str(e)
            raise CheckpointError(
                f"cannot read {source} from checkpoint {checkpoint}: "
                f"{message.strip().splitlines()[0]}") from None
    for (variable, _), value in zip(targets, values):
        variable.assign(np.asarray(value).astype(variable.dtype, copy=False))


def _log_report(report: LoadReport, model_name: str) -> None:
    logging.info("%s", report)
    if report.missing:
        logging.warning("%d variables of %s are not in %s: %s", len(report.missing),
                        model_name, report.checkpoint, ", ".join(report.missing))
    if report.optimizer_missing:
        logging.warning("%d optimizer entries are not in %s (kept their values): %s",
                        len(report.optimizer_missing), report.checkpoint,
                        ", ".join(report.optimizer_missing))


def load_tf1_checkpoint(model, path, *, strict: bool = False,
                        prefix: str | None = None, optimizer=None) -> LoadReport:
    """Assigns every model variable whose TF1 name is in the checkpoint at `path`.

    Args:
      model: a Keras model or layer of this package (weights created).
      path: see `resolve_checkpoint`. Google's names or brightmart/albert_zh's (read as
        the equivalent Google layout: the model must be built from
        `brightmart.google_config`, as `from_release` does).
      strict: raise if any model variable is missing from the checkpoint.
      prefix: a leading scope of the checkpoint names to strip (e.g. "module/" for
        TF-Hub module variables). None detects it.
      optimizer: an optimizer that names its TF1 state with `tf1_variables(model)`,
        e.g. `albert_tf.training.optimizers` AdamWeightDecay or Lamb (built on the
        model's trainable variables if it is not yet): its slots are loaded from the
        original's `<name>/adam_m` and `<name>/adam_v`, its `iterations` from
        `global_step`. With `strict`, all of them must be in the checkpoint.

    All shapes are checked before anything is assigned; mismatches raise one
    `CheckpointError` that lists every mismatched variable with both shapes.
    """
    checkpoint = resolve_checkpoint(path)
    return load_weights(model, open_reader(checkpoint), checkpoint, strict=strict,
                        prefix=prefix, optimizer=optimizer)


def _layout_hint(reader) -> str:
    """What to do when a checkpoint of another layout does not fit."""
    if layout_of(reader) == "brightmart":
        return ("\nThis is a brightmart/albert_zh checkpoint: its Google-layout "
                "equivalent has embedding_size = hidden_size. Build the model from "
                "albert_tf.checkpoints.brightmart.google_config(config), or load the release "
                "directory with from_release / --init_checkpoint=<directory>.")
    return ""


def load_weights(model, reader, checkpoint: str, *, strict: bool = False,
                 prefix: str | None = None, optimizer=None) -> LoadReport:
    """`load_tf1_checkpoint` from an open `reader`: anything with
    `get_variable_to_shape_map`, `get_variable_to_dtype_map` and `get_tensor` by TF1
    name (`tf.train.load_checkpoint`'s, or a layout's that shows its weights under
    Google's names; its `source_names(name)` then gives the stored names and
    `unmapped_names()` those no TF1 name reads, for the report). `checkpoint` names it
    in messages."""
    shapes = reader.get_variable_to_shape_map()
    variables = _model_variables(model)
    if not variables:
        raise CheckpointError(f"{model.name} has no weights yet to load {checkpoint} into")

    skipped = sorted(n for n in shapes if is_training_state(n))
    candidates = sorted(n for n in shapes if not is_training_state(n))
    if prefix is None:
        prefix = _detect_prefix(candidates, set(variables))
    by_model_name = {n[len(prefix):]: n for n in candidates if n.startswith(prefix)}

    weights = _match_model_variables(variables, by_model_name, shapes,
                                     reader.get_variable_to_dtype_map())
    optimizer_variables = {} if optimizer is None else _optimizer_variables(optimizer, model)
    slots = _match_optimizer_variables(optimizer_variables, prefix, shapes)
    _check_fit(checkpoint, model, variables, candidates, weights, slots, strict,
               hint=_layout_hint(reader))

    _read_and_assign(reader, checkpoint, [
        (variables[n], s) for n, s in weights.sources.items()] + [
        (optimizer_variables[n], s) for n, s in slots.sources.items()])

    source_names = getattr(reader, "source_names", lambda name: (name,))
    used = {s for n in weights.sources.values() for s in source_names(n)}
    stored = {s for n in candidates for s in source_names(n)}
    stored.update(getattr(reader, "unmapped_names", list)())  # no TF1 name reads them
    slot_sources = set(slots.sources.values())
    report = LoadReport(
        checkpoint=checkpoint, prefix=prefix, loaded=list(weights.sources),
        missing=weights.missing, unused=sorted(stored - used),
        skipped=[n for n in skipped if n not in slot_sources],
        optimizer_loaded=sorted(slots.sources), optimizer_missing=slots.missing,
        layout=layout_of(reader))
    _log_report(report, model.name)
    return report


_DATA_SUFFIX = ".data-00000-of-00001"


def save_tf1_checkpoint(model, path: str | os.PathLike, *,
                        global_step: int | None = None,
                        update_state_file: bool = False, optimizer=None) -> str:
    """Writes the model's weights under their TF1 names as a name-based checkpoint
    (a LoRA model's merged: `merged_weights`, a plain ALBERT).

    `<path>.index` and `<path>.data-00000-of-00001` are written under a temporary name
    and renamed when complete; the original TF1 code (`--init_checkpoint=<path>`),
    `tf.train.load_checkpoint` and `load_tf1_checkpoint` read them. With
    `update_state_file` the directory's `checkpoint` file is pointed at `path` (off by
    default: a training directory's own state file is left alone). With `optimizer` (one
    with `tf1_variables(model)`, e.g. AdamWeightDecay or Lamb of
    `albert_tf.training.optimizers`) its slots are written as the original's
    `<name>/adam_m`, `<name>/adam_v`, and `global_step` is its `iterations` unless
    `global_step` is given. Returns `path`.
    """
    path = os.fspath(path)
    variables = _model_variables(model)
    if getattr(model, "lora_rank", None):  # the merged weights: a plain ALBERT
        variables = model.merged_weights()
    if optimizer is not None:
        state = _optimizer_variables(optimizer, model)
        step = state.pop("global_step")
        if global_step is None:
            global_step = int(tf.convert_to_tensor(step).numpy())
        variables.update(state)
    names = sorted(variables)
    tensors = [tf.convert_to_tensor(getattr(variables[n], "value", variables[n]))
               for n in names]
    if global_step is not None:
        names.append("global_step")
        tensors.append(tf.constant(global_step, tf.int64))
    directory = os.path.dirname(path) or "."
    # The data file is renamed before the index: a reader that finds the new index
    # finds its data.
    with fileio.atomic_path(path, suffixes=(_DATA_SUFFIX, ".index")) as tmp, \
            tf.device("CPU:0"):
        tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names,
                          shape_and_slices=[""] * len(names), tensors=tensors)
    if update_state_file:
        tf.compat.v1.train.update_checkpoint_state(
            directory, os.path.basename(path),
            all_model_checkpoint_paths=[os.path.basename(path)])
    return path
