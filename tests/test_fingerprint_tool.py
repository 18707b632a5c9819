"""tools/fingerprint.py's comparison (the proof that a restructuring changed no output):
what counts as the same file. Its end-to-end runs of the scripts are not repeated
here; the scripts' own tests run them."""

import importlib.util
import json

import tensorflow as tf

from albert_tf.data import records
from tests.helpers.scripts import ROOT

spec = importlib.util.spec_from_file_location("fingerprint", ROOT / "tools" / "fingerprint.py")
fingerprint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fingerprint)


def write_run(directory, feature_order, timestamp, digest):
    """A run's directory: records (features in `feature_order`), their cache settings,
    the checkpoint state file, a result naming the directory, files left out."""
    directory.mkdir()
    features = {name: records.int64_feature([len(name)]) for name in feature_order}
    example = tf.train.Example(features=tf.train.Features(feature=features))
    with tf.io.TFRecordWriter(str(directory / "train.tf_record")) as writer:
        writer.write(example.SerializeToString())  # in the order given
    (directory / "train.tf_record.meta.json").write_text(json.dumps(
        {"settings": {"max_seq_length": 8}, "records_sha256": digest}))
    (directory / "checkpoint").write_text(
        f'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_timestamps: {timestamp}\n')
    (directory / "eval_results.txt").write_text(f"path = {directory}/ckpt-2\nf1 = 0.5\n")
    (directory / "train").mkdir()
    (directory / "train" / "events.out.tfevents.1.host").write_bytes(timestamp.encode())
    (directory / "export").mkdir()
    (directory / "export" / "saved_model.pb").write_bytes(timestamp.encode())


def test_runs_that_differ_only_where_any_two_runs_do_are_the_same(tmp_path):
    write_run(tmp_path / "one", ["input_ids", "label_ids", "segment_ids"], "1.5", "aa")
    write_run(tmp_path / "two", ["segment_ids", "input_ids", "label_ids"], "9.25", "bb")
    one, two = (fingerprint.fingerprint(tmp_path / n) for n in ("one", "two"))
    assert sorted(one) == ["checkpoint", "eval_results.txt", "train.tf_record",
                           "train.tf_record.meta.json"]
    assert fingerprint.compare(one, two) == []


def test_a_changed_record_result_or_file_list_is_reported(tmp_path):
    write_run(tmp_path / "one", ["input_ids", "label_ids"], "1.5", "aa")
    write_run(tmp_path / "two", ["input_ids", "label_ids", "segment_ids"], "1.5", "aa")
    (tmp_path / "two" / "eval_results.txt").write_text("f1 = 0.6\n")
    (tmp_path / "two" / "model.ckpt-2.index").write_bytes(b"new")
    (tmp_path / "one" / "test_results.tsv").write_text("0.5\n")
    changes = fingerprint.compare(fingerprint.fingerprint(tmp_path / "one"),
                                  fingerprint.fingerprint(tmp_path / "two"))
    assert changes == ["eval_results.txt differs", "train.tf_record differs",
                       "model.ckpt-2.index is new", "test_results.tsv is gone"]
