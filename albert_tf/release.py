"""Google's release directories: find their files (`AlbertModel.from_release` loads one).

A release as Google ships it, e.g. `albert_base/` from `albert_base_v2.tar.gz`:
  albert_config.json  30k-clean.model  30k-clean.vocab  model.ckpt-best.{index,data-*,meta}
The Chinese models carry a WordPiece `vocab_chinese.txt` instead of a SentencePiece
model; a TF-Hub module keeps `assets/` and `variables/variables.*`. Nothing here
downloads: the directory must already be on disk (or on a `tf.io.gfile` file system).
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from albert_tf.checkpoints import CheckpointError, resolve_checkpoint


@dataclasses.dataclass
class ReleaseFiles:
    """The files of a release directory (`spm_model_file` / `vocab_file` may be None)."""

    directory: str
    config_file: str
    checkpoint: str
    spm_model_file: str | None
    vocab_file: str | None


def _glob_one(directory: str, patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        found = sorted(tf.io.gfile.glob(os.path.join(directory, pattern)))
        if found:
            return found[0]
    return None


def find_release_files(directory: str | os.PathLike) -> ReleaseFiles:
    """Locates config, checkpoint and tokenizer files in a release directory."""
    directory = os.fspath(directory)
    if not tf.io.gfile.isdir(directory):
        raise CheckpointError(f"release directory {directory} does not exist")
    config_file = _glob_one(directory, ("albert_config.json", "assets/albert_config.json",
                                        "*config*.json"))
    if config_file is None:
        raise CheckpointError(
            f"release directory {directory} has no albert_config.json")
    return ReleaseFiles(
        directory=directory,
        config_file=config_file,
        checkpoint=resolve_checkpoint(directory),
        spm_model_file=_glob_one(directory, ("*.model", "assets/*.model")),
        vocab_file=_glob_one(directory, ("vocab*.txt", "assets/vocab*.txt", "*.vocab",
                                         "assets/*.vocab")),
    )
