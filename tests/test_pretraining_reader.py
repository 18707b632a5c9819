"""`pretraining_dataset` (`albert_tf.data.pretraining.reader`): records read back in
batches with the original names, shuffled by seed, trimmed on request."""


import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import pretraining as pt
from tests.helpers.paths import ALICE
from tests.helpers.pretraining_data import config, spm_spec_of


@pytest.fixture(scope="module")
def spm_spec():
    return spm_spec_of()


@pytest.fixture(scope="module")
def record_files(tmp_path_factory, spm_spec):
    directory = tmp_path_factory.mktemp("records")
    stats = pt.create_pretraining_data(str(ALICE), f"{directory}/r@2", spm_spec,
                                       config(), num_workers=0)
    return stats


def test_pretraining_dataset_reads_every_record_with_original_names(record_files):
    dataset = pt.pretraining_dataset(record_files.output_files, 16, is_training=False,
                                     drop_remainder=False)
    total = 0
    for batch in dataset:
        assert set(batch) == set(pt.FEATURE_NAMES)
        assert batch["input_ids"].dtype == tf.int32
        assert batch["masked_lm_weights"].dtype == tf.float32
        assert batch["input_ids"].shape[1] == 64 and batch["masked_lm_ids"].shape[1] == 10
        assert batch["next_sentence_labels"].shape[1] == 1
        total += batch["input_ids"].shape[0]
    assert total == record_files.num_instances


def test_pretraining_dataset_shuffles_by_seed_and_trims(record_files):
    def first_batches(seed, **kwargs):
        dataset = pt.pretraining_dataset(record_files.output_files, 8, seed=seed,
                                         max_seq_length=64, max_predictions_per_seq=10,
                                         **kwargs)
        return [b for b in dataset.take(3)]

    a, b, c = first_batches(11), first_batches(11), first_batches(12)
    assert a[0]["input_ids"].shape == (8, 64)  # drop_remainder: a static batch size
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
    assert any(not np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c))
    for batch in first_batches(11, trim_padding=True):
        longest = int(tf.reduce_max(tf.reduce_sum(batch["input_mask"], 1)))
        for name in pt.SEQUENCE_FEATURES:
            assert batch[name].shape[1] == longest
        assert batch["masked_lm_positions"].shape[1] == 10


def test_a_resumed_stream_skips_to_the_batches_the_run_would_have_read(record_files):
    """What `run_pretraining.py` resumes on: `skip(k)` of the seeded training stream is
    the stream from its k-th batch on, beyond the end of a pass (files and records
    reshuffled for the next one, by the seed)."""
    def stream(skip=0):
        return pt.pretraining_dataset(record_files.output_files, 8, seed=11).skip(skip)

    per_pass = record_files.num_instances // 8
    whole = [b["input_ids"].numpy() for b in stream().take(per_pass + 3)]
    resumed = [b["input_ids"].numpy() for b in stream(per_pass - 1).take(4)]
    for got, want in zip(resumed, whole[per_pass - 1:]):
        np.testing.assert_array_equal(got, want)
