"""What every export of `albert_tf.export` shares, below the exporters
(`savedmodel`, `reusable`, `tflite`): `ExportError` for bad arguments, the version
directories (`check_export_dir`: an exported version is never overwritten),
`assets.extra/export_info.json` (`write_export_info`, `read_export_info`) and the
description of a signature's inputs and outputs it holds.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf import fileio
from albert_tf.checkpoints.release import SAVEDMODEL, ReleaseFiles, tokenizer_files
from albert_tf.errors import UserError

EXTRA_DIR = "assets.extra"
# The model's config in EXTRA_DIR.
EXPORT_CONFIG = "albert_config.json"
EXPORT_INFO = "export_info.json"  # in EXTRA_DIR: what the export serves


class ExportError(UserError):
    """Bad arguments to an export (wrong model kind, an existing version, ...)."""


# --------------------------------------------------------------------- versioning
def next_version(export_dir) -> int:
    """1 + the largest integer subdirectory of `export_dir`, else 1."""
    return max(fileio.integer_subdirectories(export_dir), default=0) + 1


def file_in_the_way(path) -> str | None:
    """The first of `path` and the folders above it that exists and is not a directory
    (where a directory `path` cannot be made), else None."""
    path = os.fspath(path)
    path = path.rstrip("/") or path
    while path:
        if tf.io.gfile.exists(path):
            return None if tf.io.gfile.isdir(path) else path
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return None


def check_export_dir(export_dir, version: int | None = None) -> str:
    """`export_dir` checked before any work, as an export checks it: it can hold
    version directories (it is a directory, or can be made one: neither it nor a folder
    above it is a file) and `version` (default: the next one) does not exist yet;
    `ExportError` otherwise. Returns the version directory it would be now,
    `<export_dir>/<version>`."""
    export_dir = os.fspath(export_dir)
    in_the_way = file_in_the_way(export_dir)
    if in_the_way is not None:
        raise ExportError(
            f"{in_the_way} is a file, not a directory: an export's version directories "
            "go in a directory" if in_the_way == (export_dir.rstrip("/") or export_dir)
            else f"{in_the_way} is a file, so {export_dir} cannot be a directory for an "
            "export's versions")
    if version is None:
        version = next_version(export_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ExportError(f"version must be a non-negative integer, got {version!r}")
    final_dir = os.path.join(export_dir, str(version))
    if os.path.exists(final_dir):
        raise ExportError(f"{final_dir} exists; an exported version is never overwritten")
    return final_dir


def is_int_at_least(value, minimum: int) -> bool:
    """Whether `value` is an int (not a bool) of at least `minimum`."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= minimum


def signature_info(concrete) -> dict:
    """The inputs and outputs of a concrete function, by name: dtype and shape (what
    export_info.json and a LiteRT file's .json record). The signature's inputs are the
    specs' names (the functions take them positionally)."""
    args, kwargs = concrete.structured_input_signature
    inputs = {spec.name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
              for spec in [*args, *kwargs.values()]}
    outputs = {name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
               for name, spec in concrete.structured_outputs.items()}
    return {"inputs": inputs, "outputs": outputs}


# ------------------------------------------------------------------ the files
def write_export_info(version_dir, info: dict) -> str:
    """Writes `assets.extra/export_info.json` (what an export serves; the preprocessor's
    too) and returns the `assets.extra` directory."""
    extra = os.path.join(version_dir, EXTRA_DIR)
    tf.io.gfile.makedirs(extra)
    fileio.write_text_atomically(os.path.join(extra, EXPORT_INFO),
                                 json.dumps(info, indent=2, sort_keys=True) + "\n")
    return extra


def read_export_info(version_dir) -> dict:
    """An export's `assets.extra/export_info.json` (what it serves, its precision, the
    environment to serve it in)."""
    with tf.io.gfile.GFile(os.path.join(version_dir, EXTRA_DIR, EXPORT_INFO)) as f:
        return json.load(f)


def describe_export(path: str | os.PathLike) -> ReleaseFiles | None:
    """A SavedModel export's files (layout `SAVEDMODEL`: what a distillation teacher
    may be; no model loads it as weights): a version directory (its saved_model.pb),
    or an export directory of versions (the newest, as TF Serving serves it); its
    config and tokenizer from its assets. None where `path` is not one."""
    path = os.fspath(path).rstrip("/")
    versions = fileio.integer_subdirectories(path)
    if versions and not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        path = os.path.join(path, str(versions[-1]))
    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        return None
    spm, vocab = tokenizer_files(os.path.join(path, "assets"))
    return ReleaseFiles(
        directory=path, config_file=os.path.join(path, EXTRA_DIR, EXPORT_CONFIG),
        checkpoint=path, spm_model_file=spm, vocab_file=vocab, layout=SAVEDMODEL,
        do_lower_case=read_export_info(path).get("do_lower_case"))
