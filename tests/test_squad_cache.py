"""Cached SQuAD features (albert_tf.data.squad.cache): reused while the settings, the
input and the records are those described, rebuilt otherwise; features for
post-processing rebuilt from the records and the JSON description."""

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from albert_tf.data import squad
from tests.helpers.squad_data import V1_EXCERPT, V2_EXCERPT, sentencepiece_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


def test_cache_reuses_and_rebuilds(tokenizer, tmp_path):
    source = tmp_path / "dev.json"
    shutil.copy(V2_EXCERPT, source)
    record_file = tmp_path / "cache" / "eval.tfrecord"
    settings = {"max_seq_length": 128, "doc_stride": 48, "max_query_length": 32}

    built = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                         **settings)
    assert built.rebuilt and built.num_features == len(built.features)
    meta = json.loads(pathlib.Path(built.meta_file).read_text())  # JSON, not pickle
    assert meta["settings"]["doc_stride"] == 48 and meta["num_features"] == built.num_features

    direct = squad.convert_examples_to_features(built.examples, tokenizer, 128, 48, 32, False)
    cached = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                          **settings)
    assert not cached.rebuilt
    assert len(cached.features) == len(direct)
    for a, b in zip(cached.features, direct):
        for field in ("unique_id", "example_index", "qas_id", "doc_span_index",
                      "doc_span_start", "doc_offset", "tok_start_to_orig_index",
                      "tok_end_to_orig_index", "token_is_max_context", "is_impossible"):
            assert getattr(a, field) == getattr(b, field), field
        for name in squad.SEQUENCE_FEATURES:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    feature = cached.features[-1]
    paragraph = cached.examples[feature.example_index].paragraph_text
    last = feature.doc_offset + feature.doc_length - 1
    assert squad.span_text(feature, paragraph, feature.doc_offset, last) == squad.span_text(
        direct[-1], paragraph, feature.doc_offset, last)

    # Features made before `` and '' kept their pieces (format 1) are rebuilt.
    meta_path = pathlib.Path(built.meta_file)
    old = json.loads(meta_path.read_text())
    old["settings"]["format_version"] = 1
    meta_path.write_text(json.dumps(old))
    assert squad.FEATURE_FORMAT_VERSION == 2
    assert squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                        **settings).rebuilt

    # A changed setting, a changed input, a replaced record file: rebuilt.
    again = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                         **{**settings, "doc_stride": 24})
    assert again.rebuilt and again.num_features > built.num_features
    data = json.loads(source.read_text("utf-8"))
    data["data"] = data["data"][:1]
    source.write_text(json.dumps(data))
    smaller = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                           **settings)
    assert smaller.rebuilt and smaller.num_features < built.num_features
    with open(record_file, "ab") as f:
        f.write(b"\0")
    assert squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                        **settings).rebuilt
    os.remove(str(record_file) + squad.META_SUFFIX)
    assert squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                        **settings).rebuilt
    assert sorted(os.listdir(record_file.parent)) == ["eval.tfrecord",
                                                       "eval.tfrecord.meta.json"]


def test_training_cache_records_settings_not_offsets(tokenizer, tmp_path):
    record_file = tmp_path / "train.tfrecord"
    built = squad.load_or_build_features(V1_EXCERPT, tokenizer, record_file, is_training=True,
                                         shuffle_seed=squad.ORIGINAL_TRAIN_SHUFFLE_SEED)
    assert built.features is None and built.rebuilt
    assert [e.qas_id for e in built.examples] == [e.qas_id for e in squad.shuffle_examples(
        squad.read_squad_examples(V1_EXCERPT, is_training=True))]
    meta = json.loads(pathlib.Path(built.meta_file).read_text())
    assert meta["features"] is None and meta["settings"]["shuffle_seed"] == 12345
    arrays = squad.read_feature_records(record_file, 384, is_training=True)
    assert len(arrays["unique_ids"]) == built.num_features
    assert not squad.load_or_build_features(
        V1_EXCERPT, tokenizer, record_file, is_training=True, shuffle_seed=12345).rebuilt
    # Asking for post-processing data the cache lacks rebuilds it.
    kept = squad.load_or_build_features(V1_EXCERPT, tokenizer, record_file, is_training=True,
                                        shuffle_seed=12345, keep_features=True)
    assert kept.rebuilt and len(kept.features) == built.num_features
