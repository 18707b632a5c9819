"""TFRecord plumbing: atomic writes, original fixed-length records read back trimmed."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import records


def example(length, max_len=8, label=0):
    ids = list(range(10, 10 + length)) + [0] * (max_len - length)
    return records.make_example({
        "input_ids": records.int64_feature(ids),
        "input_mask": records.int64_feature([1] * length + [0] * (max_len - length)),
        "segment_ids": records.int64_feature([0] * max_len),
        "label_ids": records.int64_feature([label]),
    })


SPEC = records.fixed_length_spec(8, {"label_ids": tf.io.FixedLenFeature([], tf.int64)})
LENGTHS = [3, 5, 2, 7, 8, 1, 4, 6]


@pytest.fixture
def record_file(tmp_path):
    path = tmp_path / "train.tf_record"
    assert records.write_records(path, (example(n, label=i) for i, n in enumerate(LENGTHS))) == 8
    return str(path)


def test_failed_write_leaves_no_file(tmp_path):
    def broken():
        yield example(3)
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        records.write_records(tmp_path / "out.tf_record", broken())
    assert os.listdir(tmp_path) == []


def test_eval_batches_pad_only_to_their_longest(record_file):
    batches = list(records.fine_tuning_dataset(record_file, SPEC, 2, training=False))
    assert [b["input_ids"].shape[1] for b in batches] == [5, 7, 8, 6]
    first = batches[0]
    np.testing.assert_array_equal(first["input_ids"], [[10, 11, 12, 0, 0],
                                                       [10, 11, 12, 13, 14]])
    assert first["input_ids"].dtype == tf.int32 and first["label_ids"].numpy().tolist() == [0, 1]
    model_inputs = records.to_model_inputs(first)
    assert set(model_inputs) == {"input_word_ids", "input_mask", "input_type_ids", "label_ids"}


def test_bucketing_groups_similar_lengths_and_keeps_every_example(record_file):
    batches = list(records.fine_tuning_dataset(record_file, SPEC, 2, training=False,
                                               bucket_boundaries=[5]))
    labels = sorted(int(x) for b in batches for x in b["label_ids"].numpy())
    assert labels == list(range(8))
    for batch in batches:
        lengths = batch["input_mask"].numpy().sum(-1)
        assert (lengths < 5).all() or (lengths >= 5).all()


def test_training_shuffles_with_a_seed_and_can_drop_remainder(record_file):
    def labels(seed):
        dataset = records.fine_tuning_dataset(record_file, SPEC, 3, training=True, seed=seed,
                                              drop_remainder=True)
        assert dataset.element_spec["input_ids"].shape[0] == 3  # static batch for TPU
        return [int(x) for b in dataset.take(4) for x in b["label_ids"].numpy()]

    assert labels(1) == labels(1)
    assert labels(1) != labels(2)
    assert sorted(labels(1)[:8]) != labels(1)[:8] or sorted(labels(2)[:8]) != labels(2)[:8]


def test_examples_are_written_in_feature_name_order():
    """The same features give the same bytes whatever their order (protobuf writes a map
    in an order that changes from process to process otherwise): every cached record
    file, and its records_sha256, is reproducible."""
    names = ["segment_ids", "input_ids", "label_ids", "input_mask", "is_real_example"]
    features = {name: records.int64_feature([index]) for index, name in enumerate(names)}
    data = records.make_example(features)
    assert data == records.make_example(dict(reversed(list(features.items()))))
    offsets = [data.index(name.encode()) for name in sorted(names)]
    assert offsets == sorted(offsets)
    assert tf.train.Example.FromString(data).features.feature["label_ids"] \
        .int64_list.value == [2]
