"""SQuAD features converted once and reused: the records plus a JSON description.

Beside the records, `<record_file>.meta.json` holds the settings that shaped them, the
records' SHA-256 and, when asked, what post-processing needs of every feature (the
character offsets of each paragraph's pieces, stored once per paragraph, and the
windows), so that evaluation rebuilds its `SquadFeature`s from the records without
converting again.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
from typing import Iterable, Iterator

import numpy as np
from absl import logging

from albert_tf import fileio, names
from albert_tf.data.cache import META_SUFFIX, changed_settings, file_sha256
from albert_tf.data.squad.examples import (
    SquadError,
    SquadExample,
    examples_from_bytes,
    read_squad_bytes,
    shuffle_examples,
)
from albert_tf.data.squad.features import (
    FIRST_UNIQUE_ID,
    SquadFeature,
    iter_features,
    max_context_span,
    sentencepiece_model,
    validate_settings,
)
from albert_tf.data.squad.records import read_feature_records, write_features

# Bump when a change to the package changes the features, so that caches are rebuilt.
# 2: `` and '' keep their own pieces (they were rewritten into " before).
FEATURE_FORMAT_VERSION = 2


@dataclasses.dataclass
class SquadFeatureFile:
    """What `load_or_build_features` returns.

    examples: the examples, in conversion order (shuffled when `shuffle_seed` is set).
    features: with `keep_features`, every feature (inputs read back from the records),
      for post-processing; else None.
    rebuilt: whether the records were (re)written by this call.
    """

    record_file: str
    meta_file: str
    examples: list[SquadExample]
    num_features: int
    settings: dict
    features: list[SquadFeature] | None
    rebuilt: bool


def load_or_build_features(input_file, tokenizer, record_file, *, is_training: bool,
                           max_seq_length: int = 384, doc_stride: int = 128,
                           max_query_length: int = 64, shuffle_seed: int | None = None,
                           keep_features: bool | None = None,
                           examples: list[SquadExample] | None = None) -> SquadFeatureFile:
    """Features of a SQuAD file as original-format records at `record_file`, converted
    once and reused while nothing that shapes them changes.

    Beside the records, `<record_file>.meta.json` holds the settings (SHA-256 of the
    SQuAD file and of the SentencePiece model, lowercasing, lengths, stride, mode,
    shuffle seed, format version), the records' SHA-256 and, with `keep_features`
    (default: not `is_training`), what post-processing needs for each feature (character
    offsets of the pieces, stored once per paragraph, and the windows). A cache
    whose settings differ, whose records are not the ones described, or that lacks what
    is asked for is rebuilt. Both files are written under temporary names and renamed.

    `shuffle_seed`: convert the examples in `random.Random(seed)` order, as the original
    training scripts do with `ORIGINAL_TRAIN_SHUFFLE_SEED`. `examples`: the file's
    examples already read (`read_squad_examples` with the same `is_training`), in file
    order; else read here.
    """
    input_file, record_file = os.fspath(input_file), os.fspath(record_file)
    meta_file = record_file + META_SUFFIX
    keep = (not is_training) if keep_features is None else keep_features
    validate_settings(max_seq_length, doc_stride, max_query_length)
    sp_model = sentencepiece_model(tokenizer)
    raw = read_squad_bytes(input_file)
    if examples is None:
        examples = examples_from_bytes(raw, input_file, is_training)
    if shuffle_seed is not None:
        examples = shuffle_examples(examples, shuffle_seed)
    settings = {
        "format_version": FEATURE_FORMAT_VERSION,
        "input_sha256": _sha256(raw),
        "spm_model_sha256": _sha256(sp_model.serialized_model_proto()),
        "do_lower_case": bool(tokenizer.do_lower_case),
        "max_seq_length": max_seq_length,
        "doc_stride": doc_stride,
        "max_query_length": max_query_length,
        "is_training": is_training,
        "shuffle_seed": shuffle_seed,
        "first_unique_id": FIRST_UNIQUE_ID,
    }
    cached = _load_cached(record_file, meta_file, settings, examples, keep)
    if not isinstance(cached, str):
        num_features, features = cached
        logging.info("using the %d cached SQuAD features in %s", num_features, record_file)
        return SquadFeatureFile(record_file, meta_file, examples, num_features, settings,
                                features, rebuilt=False)
    logging.info("converting %s into %s: %s", input_file, record_file, cached)
    num_features, features = _build(input_file, record_file, meta_file, examples,
                                    tokenizer, settings, keep)
    return SquadFeatureFile(record_file, meta_file, examples, num_features, settings,
                            features, rebuilt=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -------------------------------------------------------------------------- building
def _build(input_file: str, record_file: str, meta_file: str,
           examples: list[SquadExample], tokenizer, settings: dict, keep: bool
           ) -> tuple[int, list[SquadFeature] | None]:
    """Converts the examples into the records, then writes their description; returns
    (num_features, the features when `keep`)."""
    fileio.remove_if_exists(meta_file)  # never leave a description of other records
    index = _PostprocessIndex(examples)
    features = iter_features(examples, tokenizer, settings["max_seq_length"],
                             settings["doc_stride"], settings["max_query_length"],
                             settings["is_training"])
    num_features = write_features(record_file, index.remember(features) if keep else features,
                                  settings["is_training"])
    if num_features == 0:
        fileio.remove_if_exists(record_file)
        raise SquadError(f"{input_file} gave no features: no paragraph could be aligned")
    meta = {
        "format": "albert_tf SQuAD features",
        "input_file": input_file,
        "settings": settings,
        "num_examples": len(examples),
        "num_features": num_features,
        "records_sha256": file_sha256(record_file),
        "paragraphs": index.paragraphs if keep else None,
        "features": index.entries if keep else None,
    }
    fileio.write_text_atomically(meta_file, json.dumps(meta, separators=(",", ":")))
    return num_features, index.features if keep else None


class _PostprocessIndex:
    """What post-processing needs of each feature, gathered while the records are
    written: `paragraphs` holds the character offsets of every paragraph's pieces (once
    per distinct paragraph text), `entries` each feature's window and labels."""

    def __init__(self, examples: list[SquadExample]):
        self.examples = examples
        self.features: list[SquadFeature] = []
        self.entries: list[dict] = []
        self.paragraphs: list[dict] = []
        self._paragraph_index: dict[str, int] = {}

    def remember(self, features: Iterable[SquadFeature]) -> Iterator[SquadFeature]:
        for feature in features:
            self._add(feature)
            yield feature

    def _add(self, feature: SquadFeature) -> None:
        text = self.examples[feature.example_index].paragraph_text
        index = self._paragraph_index.setdefault(text, len(self.paragraphs))
        if index == len(self.paragraphs):
            self.paragraphs.append({"tok_start_to_orig_index": [],
                                    "tok_end_to_orig_index": []})
        offsets = self.paragraphs[index]
        # The windows of one example cover every piece, in order and without gaps: the
        # paragraph's first example gives all its offsets.
        end = feature.doc_span_start + feature.doc_length
        known = len(offsets["tok_start_to_orig_index"])
        if end > known:
            cut = known - feature.doc_span_start
            offsets["tok_start_to_orig_index"].extend(feature.tok_start_to_orig_index[cut:])
            offsets["tok_end_to_orig_index"].extend(feature.tok_end_to_orig_index[cut:])
        self.entries.append({
            "unique_id": feature.unique_id,
            "example_index": feature.example_index,
            "doc_span_index": feature.doc_span_index,
            "doc_span_start": feature.doc_span_start,
            "doc_length": feature.doc_length,
            "doc_offset": feature.doc_offset,
            "paragraph": index,
            "start_position": feature.start_position,
            "end_position": feature.end_position,
            "is_impossible": feature.is_impossible,
        })
        self.features.append(feature)


# --------------------------------------------------------------------------- reusing
def _load_cached(record_file: str, meta_file: str, settings: dict,
                 examples: list[SquadExample], keep_features: bool
                 ) -> tuple[int, list[SquadFeature] | None] | str:
    """(num_features, features) from a valid cache, or why it cannot be used."""
    if not fileio.exists(meta_file) or not fileio.exists(record_file):
        return "no cached features"
    try:
        meta = json.loads(fileio.read_bytes(meta_file))
        cached_settings = meta["settings"]
        records_sha256 = meta["records_sha256"]
        num_features = int(meta["num_features"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"unreadable {meta_file} ({e})"
    changed = changed_settings(settings, cached_settings)
    if changed:
        return "settings changed: " + ", ".join(changed)
    if file_sha256(record_file) != records_sha256:
        return f"{record_file} is not the file {meta_file} describes"
    if not keep_features:
        return num_features, None
    if meta.get("features") is None:
        return "no post-processing data in the cache"
    try:
        features = _features_from_cache(record_file, meta, settings, examples)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        return f"inconsistent cache ({e})"
    return num_features, features


def _features_from_cache(record_file: str, meta: dict, settings: dict,
                         examples: list[SquadExample]) -> list[SquadFeature]:
    """The features the description names, their inputs read back from the records."""
    arrays = read_feature_records(record_file, settings["max_seq_length"],
                                  settings["is_training"])
    entries = meta["features"]
    if len(entries) != len(arrays[names.UNIQUE_IDS]) or len(entries) != meta["num_features"]:
        raise ValueError("record and feature counts differ")
    paragraphs = meta["paragraphs"]
    # Max-context flags follow from the windows of each example.
    windows = collections.defaultdict(list)
    for entry in entries:
        windows[entry["example_index"]].append((entry["doc_span_start"], entry["doc_length"]))
    features = []
    for row, entry in enumerate(entries):
        if int(arrays[names.UNIQUE_IDS][row]) != entry["unique_id"]:
            raise ValueError(f"unique_id {entry['unique_id']} is not record {row}")
        offsets = paragraphs[entry["paragraph"]]
        start, length = entry["doc_span_start"], entry["doc_length"]
        window = slice(start, start + length)
        features.append(SquadFeature(
            unique_id=entry["unique_id"],
            example_index=entry["example_index"],
            qas_id=examples[entry["example_index"]].qas_id,
            doc_span_index=entry["doc_span_index"],
            doc_span_start=start,
            doc_offset=entry["doc_offset"],
            tok_start_to_orig_index=offsets["tok_start_to_orig_index"][window],
            tok_end_to_orig_index=offsets["tok_end_to_orig_index"][window],
            token_is_max_context=[
                max_context_span(windows[entry["example_index"]], p) == entry["doc_span_index"]
                for p in range(window.start, window.stop)],
            input_ids=arrays[names.INPUT_IDS][row].astype(np.int32),
            input_mask=arrays[names.INPUT_MASK][row].astype(np.int32),
            segment_ids=arrays[names.SEGMENT_IDS][row].astype(np.int32),
            p_mask=arrays[names.P_MASK][row].astype(np.int32),
            start_position=entry["start_position"],
            end_position=entry["end_position"],
            is_impossible=entry["is_impossible"]))
    return features
