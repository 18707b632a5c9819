"""SQuAD features <-> original-format TFRecords (albert_tf.data.squad.records): the
original feature names, batches trimmed and padded per batch (p_mask with 1)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad
from tests.helpers.squad_data import V1_EXCERPT, V2_EXCERPT, convert, sentencepiece_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


ORIGINAL_TRAINING_NAMES = {"unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask",
                           "start_positions", "end_positions", "is_impossible"}


@pytest.mark.parametrize("is_training", [True, False])
def test_record_round_trip(tokenizer, tmp_path, is_training):
    max_seq_length = 256
    _, features = convert(tokenizer, V2_EXCERPT, is_training, max_seq_length=max_seq_length)
    path = tmp_path / "features.tfrecord"
    assert squad.write_features(path, features, is_training) == len(features)
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]

    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(str(path)))).numpy())
    names = set(first.features.feature)
    assert names == (ORIGINAL_TRAINING_NAMES if is_training
                     else ORIGINAL_TRAINING_NAMES - {"start_positions", "end_positions",
                                                     "is_impossible"})

    batch_size = 3
    rows = 0
    lengths = []
    for batch in squad.squad_dataset(path, max_seq_length, batch_size,
                                     is_training=is_training, training=False):
        chunk = features[rows:rows + len(batch["unique_ids"])]
        width = max(int(f.input_mask.sum()) for f in chunk)
        lengths.append(width)
        assert batch["unique_ids"].numpy().tolist() == [f.unique_id for f in chunk]
        for name in squad.SEQUENCE_FEATURES:
            # Trimmed and re-padded, the batch equals the original fixed-length arrays
            # cut at the batch's longest (p_mask pads with 1 as the original does).
            assert batch[name].dtype == tf.int32
            np.testing.assert_array_equal(
                batch[name].numpy(), np.stack([getattr(f, name)[:width] for f in chunk]))
        if is_training:
            assert batch["start_positions"].numpy().tolist() == [f.start_position for f in chunk]
            assert batch["end_positions"].numpy().tolist() == [f.end_position for f in chunk]
            assert batch["is_impossible"].numpy().tolist() == [int(f.is_impossible)
                                                               for f in chunk]
        rows += len(chunk)
    assert rows == len(features)
    assert min(lengths) < max(lengths) < max_seq_length  # padded per batch

    arrays = squad.read_feature_records(path, max_seq_length, is_training)
    np.testing.assert_array_equal(arrays["p_mask"], np.stack([f.p_mask for f in features]))


def test_bucketed_batches_pad_p_mask_with_one(tokenizer, tmp_path):
    _, features = convert(tokenizer, V1_EXCERPT, True, max_seq_length=256)
    path = tmp_path / "features.tfrecord"
    squad.write_features(path, features, is_training=True)
    by_id = {f.unique_id: f for f in features}
    seen = []
    for batch in squad.squad_dataset(path, 256, 4, is_training=True, training=False,
                                     bucket_boundaries=[160, 200]):
        width = batch["p_mask"].shape[1]
        for row, unique_id in enumerate(batch["unique_ids"].numpy().tolist()):
            feature = by_id[unique_id]
            np.testing.assert_array_equal(batch["p_mask"][row], feature.p_mask[:width])
            np.testing.assert_array_equal(batch["input_ids"][row], feature.input_ids[:width])
            seen.append(unique_id)
    assert sorted(seen) == sorted(by_id)


def test_training_records_need_positions(tokenizer, tmp_path):
    _, features = convert(tokenizer, V1_EXCERPT, is_training=False)
    path = tmp_path / "x.tfrecord"
    with pytest.raises(squad.SquadError, match="no answer positions"):
        squad.write_features(path, features, is_training=True)
    assert not os.listdir(tmp_path)  # nothing half-written
