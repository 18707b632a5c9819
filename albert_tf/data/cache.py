"""Converted datasets cached beside their settings, so a stale cache is rebuilt.

A converted file `<path>` (TFRecords) has `<path>.meta.json` beside it holding the
settings that shaped it (source files and their SHA-256, lengths, the tokenizer's model
and `do_lower_case`, a format version). Both are written under temporary names and
renamed; the settings file is written last, so an interrupted conversion never leaves a
file that looks valid. Never pickle.

Beside the settings, the settings file keeps what the conversion counted: the examples,
the bad rows left out, and what `--max_seq_length` cut of the texts
(`albert_tf.data.report.Truncation`), so that a run on cached records reports what the
run that wrote them did. They are no settings: a file without them is used as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Callable

import tensorflow as tf
from absl import logging

from albert_tf.data.report import Truncation, counting_truncation

# Re-exported: the data modules, the metrics and the apps import them from here.
from albert_tf.fileio import (  # noqa: F401
    abspath_or_url,
    open_binary,
    remove_if_exists,
    write_text_atomically,
)

META_SUFFIX = ".meta.json"  # the settings file beside a cached record file
# A split's cached record file is `<task>_<suffix>.tf_record`, the original
# run_classifier.py's names (<task>_train, <task>_eval; and predict, which we prefix with
# the task too).
CACHE_SUFFIX = {"train": "train", "dev": "eval", "test": "predict"}


@dataclasses.dataclass(frozen=True)
class CachedRecords:
    path: str            # the TFRecord file
    num_examples: int
    num_skipped: int     # bad rows left out of it
    reused: bool         # True when an existing, matching file was used
    # What --max_seq_length cut of the examples' texts; None where no record writer
    # counted it (SQuAD's and NER's windows cut no text, records cached before it was)
    truncated: Truncation | None = None
    # What the task's metrics and predictions read of the split in place of what
    # `Task.read` returned, where the records make more of it (SQuAD: the examples
    # with their features and windows); None: `read`'s
    data: object = None


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open_binary(path) as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tokenizer_settings(tokenizer) -> dict:
    """What identifies a tokenizer's output: its model or vocab (path and content) and
    `do_lower_case`."""
    model = getattr(tokenizer, "spm_model_file", None)
    vocab = None if model else getattr(tokenizer, "vocab_file", None)
    return {
        "spm_model_file": abspath_or_url(model),
        "vocab_file": abspath_or_url(vocab),
        "tokenizer_sha256": file_sha256(os.fspath(model or vocab)) if model or vocab
        else None,
        "do_lower_case": bool(tokenizer.do_lower_case),
    }


def read_cache_info(path: str) -> dict | None:
    """The settings stored beside a cached record file, or None."""
    info_path = path + META_SUFFIX
    if not (tf.io.gfile.exists(path) and tf.io.gfile.exists(info_path)):
        return None
    try:
        with tf.io.gfile.GFile(info_path, "r") as f:
            return json.load(f)
    except (ValueError, OSError):
        return None


def write_cache_info(path: str, info: dict) -> None:
    """Writes `<path>.meta.json` atomically."""
    write_text_atomically(path + META_SUFFIX, json.dumps(info, indent=2, sort_keys=True))


def changed_settings(new: dict, old: dict) -> list[str]:
    """The keys whose values differ between two settings dicts."""
    return sorted(k for k in set(new) | set(old) if new.get(k) != old.get(k))


def cached_conversion(path: str, settings: dict,
                      convert: Callable[[str], tuple[int, int]]) -> CachedRecords:
    """Reuses `path` when `<path>.meta.json` holds exactly `settings`; otherwise runs
    `convert(path) -> (num_examples, num_skipped)` and stores the settings, with what
    it counted (the texts cut: `albert_tf.data.report.counting_truncation`).

    The settings file is removed before converting and written only after the records
    are complete, so an interrupted run never leaves a file that looks valid.
    """
    info = read_cache_info(path)
    if info is not None and info.get("settings") == settings:
        logging.info("using cached records %s (%d examples)", path, info["num_examples"])
        truncated = info.get("truncated")
        return CachedRecords(path, info["num_examples"], info.get("num_skipped", 0), True,
                             Truncation.from_json(truncated) if truncated else None)
    if info is not None:
        changed = changed_settings(settings, info.get("settings", {}))
        logging.info("re-converting %s: settings changed (%s)", path, ", ".join(changed))
    elif tf.io.gfile.exists(path):
        logging.warning("re-converting %s: no settings file %s%s beside it", path, path,
                        META_SUFFIX)
    remove_if_exists(path + META_SUFFIX)
    with counting_truncation() as truncated:
        num_examples, num_skipped = convert(path)
    truncated = truncated if truncated.examples else None
    write_cache_info(path, {"settings": settings, "num_examples": num_examples,
                            "num_skipped": num_skipped,
                            "truncated": truncated.to_json() if truncated else None})
    return CachedRecords(path, num_examples, num_skipped, False, truncated)
