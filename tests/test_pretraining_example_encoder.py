"""The record format (`features`) and its encoder (`example_encoder`): what
`tf.train.Example` itself writes, with the original's feature names and types."""


import numpy as np
import tensorflow as tf

from albert_tf.data import masking, records
from albert_tf.data import pretraining as pt


def test_feature_spec_names_dtypes_and_shapes():
    spec = pt.pretraining_feature_spec(128, 20)
    assert list(spec) == list(pt.FEATURE_NAMES)
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "input_ids": ([128], tf.int64), "input_mask": ([128], tf.int64),
        "segment_ids": ([128], tf.int64), "token_boundary": ([128], tf.int64),
        "masked_lm_positions": ([20], tf.int64), "masked_lm_ids": ([20], tf.int64),
        "masked_lm_weights": ([20], tf.float32), "next_sentence_labels": ([1], tf.int64)}


def instance_batch(instances):
    """(ids, segment A length, token_boundary, positions, masked ids, label) tuples as
    an `InstanceBatch`."""
    def offsets(arrays):
        return np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int64)

    ids, a_lengths, boundary, positions, masked_ids, labels = zip(*instances)
    masked = masking.MaskedBatch(
        starts=offsets(ids), input_ids=np.concatenate(ids),
        token_boundary=np.concatenate(boundary), masked_starts=offsets(positions),
        masked_lm_positions=np.concatenate(positions),
        masked_lm_ids=np.concatenate(masked_ids))
    return pt.InstanceBatch(masked, np.array(a_lengths), np.array(labels, np.int8))


def test_example_encoder_writes_what_tf_train_example_writes():
    rng = np.random.default_rng(7)
    seq_len, max_pred = 200, 6  # positions >= 128 need two-byte varints
    instances = []
    for n in (5, 77, 200):
        ids = rng.integers(0, 2 ** 35, size=n)  # up to five-byte varints
        ids[:3] = [0, 127, 128]
        k = min(n - 2, max_pred)
        positions = np.sort(rng.choice(np.arange(1, n), size=k, replace=False))
        instances.append((ids, 3, rng.integers(0, 2, n).astype(np.int8), positions,
                          rng.integers(0, 30_000, k), int(n % 2)))
    encoded = pt.ExampleEncoder(seq_len, max_pred).encode(instance_batch(instances))
    assert len(encoded) == len(instances)
    for (ids, len_a, boundary, positions, masked_ids, label), data in zip(instances, encoded):
        n, k = len(ids), len(positions)

        def padded(values, length, fill=0):
            return list(values) + [fill] * (length - len(values))

        expected = records.make_example({
            "input_ids": records.int64_feature(padded(ids, seq_len)),
            "input_mask": records.int64_feature(padded([1] * n, seq_len)),
            "segment_ids": records.int64_feature(padded([0] * len_a + [1] * (n - len_a),
                                                        seq_len)),
            "token_boundary": records.int64_feature(padded(boundary, seq_len)),
            "masked_lm_positions": records.int64_feature(padded(positions, max_pred)),
            "masked_lm_ids": records.int64_feature(padded(masked_ids, max_pred)),
            "masked_lm_weights": records.float_feature(padded([1.0] * k, max_pred, 0.0)),
            "next_sentence_labels": records.int64_feature([label]),
        })
        assert tf.train.Example.FromString(data) == tf.train.Example.FromString(expected)
