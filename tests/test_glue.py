"""GLUE processors, features, records and cache (albert_tf.data.glue).

`fixtures/glue` is a tiny GLUE root: a few rows copied from the real MRPC, SST-2, RTE
and CoLA files, and rows in the real layouts of STS-B, QQP, MNLI, QNLI, WNLI and the
diagnostic set.
"""

import json
import logging
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import glue, sentence_records
from albert_tf.tokenization import FullTokenizer

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
GLUE_ROOT = FIXTURES / "glue"
SPM_MODEL = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
SHARED_GLUE = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data" / "glue"
THIS_IS_A_TEST = [48, 25, 21, 1289]  # "this is a test" with the 30k model
CLS_ID, SEP_ID = 2, 3


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


def write_tsv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(
        (row if isinstance(row, bytes) else "\t".join(row).encode()) + b"\n" for row in rows))


# ------------------------------------------------------------------------ the tasks
def test_task_names_labels_and_metrics_are_the_originals():
    assert set(glue.GLUE_TASKS) == {"cola", "mnli", "mismnli", "mrpc", "rte", "sst-2",
                                    "sts-b", "qqp", "qnli", "wnli", "ax"}
    labels = {name: task.labels for name, task in glue.GLUE_TASKS.items()}
    assert labels["mnli"] == labels["mismnli"] == labels["ax"] == (
        "contradiction", "entailment", "neutral")
    assert labels["rte"] == labels["qnli"] == ("entailment", "not_entailment")
    for name in ("cola", "sst-2", "mrpc", "qqp", "wnli"):
        assert labels[name] == ("0", "1")
    stsb = glue.get_task("STS-B")
    assert stsb.is_regression and stsb.labels == () and stsb.num_labels == 1
    assert glue.GlueProcessor("sts-b").get_labels() == [None]
    assert {n: t.metric for n, t in glue.GLUE_TASKS.items()
            if t.metric != "eval_accuracy"} == {"cola": "matthew_corr", "sts-b": "pearson"}
    assert {n for n, t in glue.GLUE_TASKS.items() if not t.is_pair} == {"cola", "sst-2"}
    assert glue.get_task("ax").splits == ("test",)


def test_task_lookup_is_case_insensitive_with_aliases():
    assert glue.get_task("MRPC").name == "mrpc"
    assert glue.get_task(" Sst-2 ").name == "sst-2"
    assert glue.get_task("STS").name == glue.get_task("stsb").name == "sts-b"
    assert glue.get_task("MNLI-MM").name == "mismnli"
    with pytest.raises(glue.GlueDataError, match="unknown GLUE task 'squad'.*mrpc"):
        glue.get_task("squad")


# ------------------------------------------------------------------- the processors
# task, split -> (count, guid, start of text_a, start of text_b, label) of the first
# example, read with the SentencePiece preprocessing (lowercase).
FIRST_EXAMPLES = {
    ("cola", "train"): (4, "train-0", "our friends won't", None, "1"),
    ("cola", "dev"): (3, "dev-0", "the sailors rode", None, "1"),
    ("cola", "test"): (2, "0", "bill whistled", None, None),
    ("sst-2", "train"): (4, "train-1", "hide new secretions", None, "0"),
    ("sst-2", "test"): (3, "0", "uneasy mishmash", None, None),
    ("mrpc", "train"): (4, "train-1", "amrozi accused", "referring to him", "1"),
    ("mrpc", "dev"): (3, "dev-1", "he said the", '"the foodservice', "1"),
    ("mrpc", "test"): (3, "0", "pccw's chief", "current chief", None),
    ("sts-b", "train"): (3, "0", "a plane is", "an air plane", 5.0),
    ("sts-b", "test"): (1, "0", "a girl is styling", "a girl is brushing", None),
    ("qqp", "dev"): (2, "201359", "why are african", "why are hispanics", "0"),
    ("qqp", "test"): (1, "0", "why am i mentally", "find the remainder", None),
    ("mnli", "train"): (3, "0", "conceptually cream", "product and geography", "neutral"),
    ("mnli", "dev"): (2, "0", "the new rights", "everyone really", "neutral"),
    ("mnli", "test"): (1, "0", "hierbas, ans seco", "hierbas is a name", None),
    ("mismnli", "dev"): (1, "0", "your contribution", "your contributions",
                         "contradiction"),
    ("mismnli", "test"): (2, "0", "what have you", "so what's your", None),
    ("qnli", "train"): (2, "0", "when did the third", "unlike the two", "not_entailment"),
    ("rte", "dev"): (3, "0", "dana reeve", "christopher reeve had", "not_entailment"),
    ("rte", "test"): (3, "0", "mangla was", "shukla is related", None),
    ("wnli", "train"): (4, "0", "i stuck a pin", "the carrot had", "1"),
    ("ax", "test"): (2, "0", "the cat sat", "the cat did not", None),
}


@pytest.mark.parametrize("task,split", sorted(FIRST_EXAMPLES))
def test_processor_reads_the_real_layout(task, split, tokenizer):
    count, guid, text_a, text_b, label = FIRST_EXAMPLES[(task, split)]
    processor = glue.get_processor(task, tokenizer)
    examples = processor.get_examples(GLUE_ROOT, split)
    assert len(examples) == count and processor.last_skipped == 0
    first = examples[0]
    assert first.guid == guid and first.label == label
    assert first.text_a.startswith(text_a)
    if text_b is None:
        assert first.text_b is None
    else:
        assert first.text_b.startswith(text_b)
    if split == "test":
        assert all(e.label is None for e in examples)


def test_processor_labels_of_every_row_and_text_untouched_without_tokenizer():
    processor = glue.GlueProcessor("MRPC")  # no SentencePiece: text kept as it is
    train = processor.get_train_examples(GLUE_ROOT)
    assert [e.label for e in train] == ["1", "0", "1", "0"]
    assert [e.guid for e in train] == ["train-1", "train-2", "train-3", "train-4"]
    assert train[0].text_a.startswith("Amrozi accused his brother, whom he called \"the")
    assert [e.label for e in glue.GlueProcessor("rte").get_dev_examples(GLUE_ROOT)] == [
        "not_entailment", "entailment", "not_entailment"]
    stsb = glue.GlueProcessor("sts-b").get_dev_examples(GLUE_ROOT)
    assert [e.label for e in stsb] == [5.0, 4.75]
    cola = glue.GlueProcessor("cola").get_dev_examples(GLUE_ROOT)  # no header: 3 rows
    assert [e.label for e in cola] == ["1", "1", "0"]
    assert cola[2].text_a == "As you eat the most, you want the least."


def test_mnli_matched_and_mismatched_read_different_files():
    assert glue.get_task("mnli").path(GLUE_ROOT, "dev").endswith(
        os.path.join("MNLI", "dev_matched.tsv"))
    assert glue.get_task("mismnli").path(GLUE_ROOT, "test").endswith(
        os.path.join("MNLI", "test_mismatched.tsv"))
    matched = glue.GlueProcessor("mnli").get_dev_examples(GLUE_ROOT)
    mismatched = glue.GlueProcessor("mismnli").get_dev_examples(GLUE_ROOT)
    assert [e.label for e in matched] == ["neutral", "contradiction"]  # gold_label
    assert [e.label for e in mismatched] == ["contradiction"]
    # Both read the same train file.
    assert (glue.GlueProcessor("mnli").get_train_examples(GLUE_ROOT)
            == glue.GlueProcessor("mismnli").get_train_examples(GLUE_ROOT))


def test_ax_is_test_only():
    with pytest.raises(glue.GlueDataError, match="ax has no 'train' split"):
        glue.GlueProcessor("ax").get_train_examples(GLUE_ROOT)


# --------------------------------------------------------------------- bad input
def test_bad_rows_are_skipped_counted_and_named(tmp_path, caplog):
    path = tmp_path / "RTE" / "train.tsv"
    write_tsv(path, [
        ["index", "sentence1", "sentence2", "label"],
        ["0", "A man sleeps.", "A person sleeps.", "entailment"],
        ["1", "A man sleeps.", "A dog runs.", "maybe"],             # unknown label
        ["2", "A man sleeps."],                                      # missing columns
        b"3\tA caf\xe9 opens.\tA shop opens.\tentailment",           # Latin-1, not UTF-8
        ["4", "It rains.", "It is wet.", "not_entailment"],
    ])
    processor = glue.GlueProcessor("rte")
    with caplog.at_level(logging.WARNING):
        examples = processor.get_train_examples(tmp_path)
    assert [e.guid for e in examples] == ["0", "4"]
    assert processor.last_skipped == 3
    text = caplog.text
    assert f"1 unknown label ({path}:3: label 'maybe'" in text
    assert f"1 wrong number of fields ({path}:4: 2 fields, expected 4 as the header" in text
    assert f"1 invalid UTF-8 ({path}:5: byte 0xe9 at column 8" in text
    assert "skipped 3 of 5" in text


def test_regression_label_must_be_a_number(tmp_path, caplog):
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2", "score"]
    row = ["0", "g", "f", "2012", "0", "none", "none", "A cat.", "A dog."]
    write_tsv(tmp_path / "STS-B" / "dev.tsv", [header, row + ["high"], row + ["1.5"]])
    with caplog.at_level(logging.WARNING):
        examples = glue.GlueProcessor("sts-b").get_dev_examples(tmp_path)
    assert [e.label for e in examples] == [1.5]
    assert "1 label not a number (" in caplog.text and "dev.tsv:2: label 'high')" in caplog.text


def test_nothing_usable_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "SST-2" / "dev.tsv"
    write_tsv(path, [["sentence", "label"], ["good film", "positive"], ["bad", "2"]])
    with pytest.raises(glue.GlueDataError, match=r"no usable sst-2 dev example in .*"
                       r"SST-2/dev\.tsv: skipped 2 of 2 sst-2 dev row\(s\): 2 unknown label"):
        glue.GlueProcessor("sst-2").get_dev_examples(tmp_path)


def test_missing_files_name_the_path_and_the_glue_root(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        glue.GlueProcessor("mrpc").get_train_examples(tmp_path)
    message = str(error.value)
    assert str(tmp_path / "MRPC" / "train.tsv") in message
    assert "--data_dir is the GLUE root" in message and "adds 'MRPC/train.tsv'" in message
    # Pointing at the task folder itself is recognised.
    with pytest.raises(FileNotFoundError, match="looks like the MRPC folder itself"):
        glue.GlueProcessor("mrpc").get_train_examples(GLUE_ROOT / "MRPC")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        glue.cached_glue_records("rte", "dev", tmp_path / "nowhere", tmp_path, None, 8)


# --------------------------------------------------------------------- features
def test_pair_features_token_by_token(tokenizer):
    example = glue.InputExample("x", tokenizer.preprocess("This  is A test"),
                                tokenizer.preprocess("this is a test"), "1")
    features = glue.convert_single_example(example, "mrpc", 16, tokenizer)
    expected_ids = [CLS_ID] + THIS_IS_A_TEST + [SEP_ID] + THIS_IS_A_TEST + [SEP_ID]
    assert features.input_ids == expected_ids + [0] * 5
    assert features.input_mask == [1] * 11 + [0] * 5
    assert features.segment_ids == [0] * 6 + [1] * 5 + [0] * 5
    assert features.label_id == 1 and features.is_real_example


def test_single_sentence_and_empty_b_features(tokenizer):
    single = glue.convert_single_example(
        glue.InputExample("x", "this is a test", None, "0"), "sst-2", 8, tokenizer)
    assert single.input_ids == [CLS_ID] + THIS_IS_A_TEST + [SEP_ID, 0, 0]
    assert single.segment_ids == [0] * 8 and single.input_mask == [1] * 6 + [0] * 2
    # As in the original, an empty text_b means a single sequence (no second [SEP]).
    empty_b = glue.convert_single_example(
        glue.InputExample("x", "this is a test", "", "0"), "qqp", 8, tokenizer)
    assert empty_b.input_ids == single.input_ids
    # A single sequence keeps its first max_seq_length - 2 tokens.
    cut = glue.convert_single_example(
        glue.InputExample("x", "this is a test", None, "1"), "cola", 5, tokenizer)
    assert cut.input_ids == [CLS_ID] + THIS_IS_A_TEST[:3] + [SEP_ID]


def test_pair_truncation_is_longest_first(tokenizer):
    text_a = "this is a test this is"      # 6 tokens
    text_b = "a test this is a"            # 5 tokens
    ids_a, ids_b = tokenizer.encode(text_a), tokenizer.encode(text_b)
    assert (len(ids_a), len(ids_b)) == (6, 5)
    features = glue.convert_single_example(
        glue.InputExample("x", text_a, text_b, "entailment"), "rte", 10, tokenizer)
    # Budget 7: pop a (5,5), tie pops b (5,4), a (4,4), b (4,3).
    assert features.input_ids == [CLS_ID] + ids_a[:4] + [SEP_ID] + ids_b[:3] + [SEP_ID]
    assert features.segment_ids == [0] * 6 + [1] * 4
    # A short B keeps every token; A gives way.
    short = glue.convert_single_example(
        glue.InputExample("x", text_a + " " + text_a, "this", "entailment"), "rte", 8,
        tokenizer)
    assert short.input_ids == ([CLS_ID] + tokenizer.encode(text_a)[:4] + [SEP_ID]
                               + tokenizer.encode("this") + [SEP_ID])


def test_labels_become_ids_and_test_examples_get_zero(tokenizer):
    def label_of(task, label):
        example = glue.InputExample("x", "this", "is", label)
        return glue.convert_single_example(example, task, 8, tokenizer).label_id
    assert [label_of("mnli", lab) for lab in ("contradiction", "entailment", "neutral")] == [
        0, 1, 2]
    assert label_of("qnli", "not_entailment") == 1
    assert label_of("mnli", None) == 0 and label_of("sts-b", None) == 0.0
    assert label_of("sts-b", 3.8) == pytest.approx(3.8)
    with pytest.raises(sentence_records.SentenceDataError, match="unknown rte label 'neutral'"):
        label_of("rte", "neutral")
    with pytest.raises(ValueError, match="at least 3"):
        glue.convert_single_example(glue.InputExample("x", "a", "b", "0"), "mrpc", 2,
                                    tokenizer)


# ------------------------------------------------------------------------ records
def test_records_round_trip_in_the_original_format(tmp_path, tokenizer):
    examples = glue.get_processor("rte", tokenizer).get_train_examples(GLUE_ROOT)
    features = [glue.convert_single_example(e, "rte", 64, tokenizer) for e in examples]
    path = tmp_path / "rte_train.tf_record"
    assert glue.write_examples(examples, "rte", 64, tokenizer, path) == 4
    assert os.listdir(tmp_path) == ["rte_train.tf_record"]  # no temporary file left

    # The file holds the original's fixed-length int64 features.
    raw = [tf.train.Example.FromString(r.numpy()).features.feature
           for r in tf.data.TFRecordDataset(str(path))]
    assert sorted(raw[0]) == ["input_ids", "input_mask", "is_real_example", "label_ids",
                              "segment_ids"]
    for record, feature in zip(raw, features):
        assert list(record["input_ids"].int64_list.value) == feature.input_ids
        assert len(record["segment_ids"].int64_list.value) == 64
        assert list(record["label_ids"].int64_list.value) == [feature.label_id]
        assert list(record["is_real_example"].int64_list.value) == [1]

    # Read back: each batch is padded to its own longest example.
    batches = list(glue.glue_dataset(path, "rte", 64, 3, training=False))
    assert [b["input_ids"].shape[0] for b in batches] == [3, 1]
    lengths = [sum(f.input_mask) for f in features]
    for batch, chunk in zip(batches, ([0, 1, 2], [3])):
        longest = max(lengths[i] for i in chunk)
        assert batch["input_ids"].shape[1] == longest
        assert batch["input_ids"].dtype == tf.int32 and batch["label_ids"].dtype == tf.int32
        for row, i in enumerate(chunk):
            np.testing.assert_array_equal(batch["input_ids"][row],
                                          features[i].input_ids[:longest])
            np.testing.assert_array_equal(batch["segment_ids"][row],
                                          features[i].segment_ids[:longest])
            np.testing.assert_array_equal(batch["input_mask"][row],
                                          features[i].input_mask[:longest])
    assert [int(v) for b in batches for v in b["label_ids"]] == [1, 0, 0, 0]
    assert all(int(v) == 1 for b in batches for v in b["is_real_example"])


def test_regression_records_have_float_labels(tmp_path, tokenizer):
    examples = glue.get_processor("sts-b", tokenizer).get_train_examples(GLUE_ROOT)
    path = tmp_path / "stsb.tf_record"
    glue.write_examples(examples, "sts-b", 32, tokenizer, path)
    record = tf.train.Example.FromString(
        next(iter(tf.data.TFRecordDataset(str(path)))).numpy()).features.feature
    assert list(record["label_ids"].float_list.value) == [5.0]
    assert not record["label_ids"].int64_list.value
    (batch,) = list(glue.glue_dataset(path, "sts-b", 32, 8, training=False))
    assert batch["label_ids"].dtype == tf.float32
    np.testing.assert_allclose(batch["label_ids"].numpy(), [5.0, 3.8, 3.8], rtol=1e-6)


def test_training_dataset_shuffles_by_seed(tmp_path, tokenizer):
    examples = glue.get_processor("mrpc", tokenizer).get_train_examples(GLUE_ROOT)
    path = tmp_path / "mrpc.tf_record"
    glue.write_examples(examples, "mrpc", 128, tokenizer, path)

    def first_ids(seed):
        dataset = glue.glue_dataset(path, "mrpc", 128, 1, training=True, seed=seed)
        return [int(b["input_ids"][0, 1]) for b in dataset.take(8)]
    assert first_ids(3) == first_ids(3)
    assert sorted(set(first_ids(3))) == sorted({int(f) for f in (
        glue.convert_single_example(e, "mrpc", 128, tokenizer).input_ids[1]
        for e in examples)})


# -------------------------------------------------------------------------- cache
def copy_task(src_root, dst_root, dir_name):
    (dst_root / dir_name).mkdir(parents=True)
    for f in (src_root / dir_name).iterdir():
        (dst_root / dir_name / f.name).write_bytes(f.read_bytes())


def test_cache_is_reused_and_invalidated(tmp_path, tokenizer):
    data, cache = tmp_path / "glue", tmp_path / "cache"
    copy_task(GLUE_ROOT, data, "MRPC")
    first = glue.cached_glue_records("MRPC", "dev", data, cache, tokenizer, 32)
    assert not first.reused and first.num_examples == 3 and first.num_skipped == 0
    assert first.path == str(cache / "mrpc_eval.tf_record")
    info = json.loads((cache / "mrpc_eval.tf_record.meta.json").read_text())
    settings = info["settings"]
    assert settings["max_seq_length"] == 32 and settings["do_lower_case"] is True
    assert settings["spm_model_file"] == str(SPM_MODEL.resolve())
    assert settings["source"] == str((data / "MRPC" / "dev.tsv").resolve())
    assert info["num_examples"] == 3
    stamp = os.stat(first.path).st_mtime_ns

    again = glue.cached_glue_records("mrpc", "dev", data, cache, tokenizer, 32)
    assert again.reused and again.num_examples == 3
    # what max_seq_length cut, counted as the records were written, comes back with them
    assert first.truncated.examples == 3 and info["truncated"] == first.truncated.to_json()
    assert again.truncated == first.truncated
    assert os.stat(first.path).st_mtime_ns == stamp

    # Another max_seq_length, another lowercasing, changed data: converted again.
    longer = glue.cached_glue_records("mrpc", "dev", data, cache, tokenizer, 48)
    assert not longer.reused
    (batch,) = glue.glue_dataset(longer.path, "mrpc", 48, 8, training=False)
    assert batch["input_ids"].shape[0] == 3
    cased = FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=False)
    assert not glue.cached_glue_records("mrpc", "dev", data, cache, cased, 48).reused
    assert glue.cached_glue_records("mrpc", "dev", data, cache, cased, 48).reused
    dev = data / "MRPC" / "dev.tsv"
    dev.write_bytes(b"\n".join(dev.read_bytes().splitlines()[:-1]) + b"\n")
    shorter = glue.cached_glue_records("mrpc", "dev", data, cache, cased, 48)
    assert not shorter.reused and shorter.num_examples == 2

    # Records without their settings file are not trusted.
    (cache / "mrpc_eval.tf_record.meta.json").unlink()
    assert not glue.cached_glue_records("mrpc", "dev", data, cache, cased, 48).reused
    assert sorted(os.listdir(cache)) == ["mrpc_eval.tf_record", "mrpc_eval.tf_record.meta.json"]


def test_failed_conversion_leaves_no_cache(tmp_path, tokenizer):
    write_tsv(tmp_path / "QNLI" / "train.tsv", [["index", "question", "sentence", "label"],
                                                ["0", "Why?", "Because.", "yes"]])
    with pytest.raises(glue.GlueDataError, match="no usable qnli train example"):
        glue.cached_glue_records("qnli", "train", tmp_path, tmp_path / "cache", tokenizer, 16)
    assert not (tmp_path / "cache").exists() or not os.listdir(tmp_path / "cache")


# ----------------------------------------------------------- the real shared data
@pytest.mark.skipif(not SHARED_GLUE.is_dir(), reason="shared GLUE data not available")
def test_real_dev_sets_read_every_row(tokenizer):
    for task in ("mrpc", "sst-2", "rte", "cola"):
        processor = glue.get_processor(task, tokenizer)
        examples = processor.get_dev_examples(SHARED_GLUE)
        path = glue.get_task(task).path(SHARED_GLUE, "dev")
        with open(path, "rb") as f:
            rows = f.read().count(b"\n") - glue.get_task(task).columns["dev"].header
        assert len(examples) == rows and processor.last_skipped == 0
        labels = set(glue.get_task(task).labels)
        assert {e.label for e in examples} == labels
