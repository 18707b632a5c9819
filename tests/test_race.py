"""RACE reading, packing of the four choices, records and cache (albert_tf.data.race).

`fixtures/race/RACE` is a tiny RACE release: {train,dev,test}/{middle,high}/*.txt, one
JSON document per file, as Google's instructions and the original `race_utils.py` use.
"""

import json
import logging
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import choice_records, race
from albert_tf.tokenization import FullTokenizer

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
RACE_ROOT = FIXTURES / "race"  # holds RACE/
SPM_MODEL = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
CLS_ID, SEP_ID = 2, 3


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


def write_doc(root, path, document):
    full = root / "RACE" / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(document if isinstance(document, bytes) else
                     json.dumps(document).encode())
    return full


def doc(answers, questions=None, options=None, article="An article.", id_="x.txt"):
    questions = questions or [f"Question {i}?" for i in range(len(answers))]
    options = options or [["one", "two", "three", "four"] for _ in answers]
    return {"answers": answers, "options": options, "questions": questions,
            "article": article, "id": id_}


def test_reads_middle_then_high_with_labels_a_to_d(tokenizer):
    examples = race.RaceProcessor.for_tokenizer(tokenizer).get_train_examples(RACE_ROOT)
    assert [e.example_id for e in examples] == [
        "middle1.txt", "middle1.txt", "middle2.txt", "high1.txt", "high1.txt", "high1.txt"]
    assert [e.label for e in examples] == [1, 3, 0, 2, 0, 1]  # B D A C A B
    assert all(len(e.endings) == race.NUM_CHOICES for e in examples)
    assert examples[0].context.startswith("tom has a cat")  # preprocessed: lowercase
    assert race.RaceProcessor().get_labels() == ["A", "B", "C", "D"]


def test_high_only_and_middle_only(tokenizer):
    high = race.RaceProcessor(high_only=True).get_dev_examples(RACE_ROOT)
    middle = race.RaceProcessor(middle_only=True).get_dev_examples(RACE_ROOT)
    both = race.RaceProcessor().get_dev_examples(RACE_ROOT)
    assert [e.example_id for e in high] == ["high1.txt", "high1.txt"]
    assert [e.example_id for e in middle] == ["middle1.txt"]
    assert both == middle + high
    with pytest.raises(race.RaceDataError, match="at most one"):
        race.RaceProcessor(high_only=True, middle_only=True)


def test_option_fills_the_blank_or_follows_the_question(tokenizer):
    examples = race.RaceProcessor.for_tokenizer(tokenizer).get_train_examples(RACE_ROOT)
    assert examples[0].endings == [
        "the cat sat in the garden all morning.", "the cat sat on the mat all morning.",
        "the cat sat under the table all morning.", "the cat sat at school all morning."]
    assert examples[1].endings[3] == "what did the dog do? he barked at the cat."
    # Text keeps its case without a tokenizer; every blank is filled.
    raw = race.RaceProcessor().get_train_examples(RACE_ROOT)
    assert raw[4].endings[0] == "The museum is mainly about science ."
    assert choice_records.make_ending("_ and _ ?", "it") == "it and it ?"
    assert choice_records.make_ending("Why?", "Because.") == "Why? Because."


def test_four_choices_packed_with_the_original_truncation(tokenizer):
    example = choice_records.ChoiceExample("e", "this is a test " * 10,
                               ["a test", "this is a test this is a test", "is", "test"], 2)
    context = tokenizer.tokenize("this is a test " * 10)  # 40 tokens
    features = choice_records.convert_single_example(example, 16, 5, tokenizer)
    ids = np.array(features.input_ids)
    assert ids.shape == (4, 16)
    for choice, ending in enumerate(example.endings):
        ending_ids = tokenizer.encode(ending)[-5:]  # the LAST max_qa_length tokens
        context_ids = tokenizer.convert_tokens_to_ids(context[:16 - 3 - len(ending_ids)])
        expected = [CLS_ID] + context_ids + [SEP_ID] + ending_ids + [SEP_ID]
        assert ids[choice].tolist() == expected + [0] * (16 - len(expected))
        assert features.segment_ids[choice] == (
            [0] * (len(context_ids) + 2) + [1] * (len(ending_ids) + 1)
            + [0] * (16 - len(expected)))
        assert features.input_mask[choice] == [1] * len(expected) + [0] * (16 - len(expected))
    # The 8-token ending kept its end: "test this is a test".
    assert ids[1, 12:15].tolist() == tokenizer.encode("is a test")
    assert features.label_id == 2
    # A short article is not padded inside: every choice is [CLS] A [SEP] B [SEP] 0...
    short = choice_records.convert_single_example(
        choice_records.ChoiceExample("s", "test", ["is"] * 4, 0), 8, 4, tokenizer)
    assert short.input_ids[0] == [CLS_ID] + tokenizer.encode("test") + [SEP_ID] + \
        tokenizer.encode("is") + [SEP_ID] + [0] * 3


def test_lengths_are_checked():
    example = choice_records.ChoiceExample("e", "a", ["b"] * 4, 0)
    with pytest.raises(ValueError, match="must leave room"):
        choice_records.convert_single_example(example, 10, 8, None)
    with pytest.raises(ValueError, match="must be positive"):
        choice_records.convert_single_example(example, 10, 0, None)


def test_records_round_trip_as_b_4_s(tmp_path, tokenizer):
    examples = race.RaceProcessor.for_tokenizer(tokenizer).get_train_examples(RACE_ROOT)
    features = [choice_records.convert_single_example(e, 64, 16, tokenizer) for e in examples]
    path = tmp_path / "race_train.tf_record"
    assert choice_records.write_examples(examples, 64, 16, tokenizer, path) == 6
    record = tf.train.Example.FromString(
        next(iter(tf.data.TFRecordDataset(str(path)))).numpy()).features.feature
    # The original format: the four sequences flattened, 4 * max_seq_length values.
    assert list(record["input_ids"].int64_list.value) == sum(features[0].input_ids, [])
    assert len(record["segment_ids"].int64_list.value) == 4 * 64
    assert list(record["label_ids"].int64_list.value) == [1]
    assert list(record["is_real_example"].int64_list.value) == [1]

    batches = list(choice_records.choice_dataset(path, 64, 4, training=False))
    assert [tuple(b["input_ids"].shape[:2]) for b in batches] == [(4, 4), (2, 4)]
    lengths = [max(sum(m) for m in f.input_mask) for f in features]
    for batch, chunk in zip(batches, ([0, 1, 2, 3], [4, 5])):
        longest = max(lengths[i] for i in chunk)
        assert batch["input_ids"].shape[2] == longest
        for row, i in enumerate(chunk):
            for name in ("input_ids", "input_mask", "segment_ids"):
                np.testing.assert_array_equal(
                    batch[name][row], np.array(getattr(features[i], name))[:, :longest])
    assert [int(v) for b in batches for v in b["label_ids"]] == [1, 3, 0, 2, 0, 1]


def test_bad_input_is_skipped_and_named(tmp_path, caplog):
    write_doc(tmp_path, "dev/middle/1.txt", doc(["A", "E", "B"], options=[
        ["a", "b", "c", "d"], ["a", "b", "c", "d"], ["a", "b", "c"]]))
    broken = write_doc(tmp_path, "dev/middle/2.txt", b'{"answers": ["A"')
    latin1 = write_doc(tmp_path, "dev/high/1.txt", b'{"article": "caf\xe9"}')
    write_doc(tmp_path, "dev/high/2.txt", doc(["D"], id_="high2.txt"))
    write_doc(tmp_path, "dev/high/notes.md", b"not a RACE file")
    processor = race.RaceProcessor()
    with caplog.at_level(logging.WARNING):
        examples = processor.get_dev_examples(tmp_path)
    assert [(e.example_id, e.label) for e in examples] == [("x.txt", 0), ("high2.txt", 3)]
    assert processor.last_skipped == 4
    text = caplog.text
    assert "1 unknown label (" in text
    assert "1.txt question 1: answer 'E' is not one of A, B, C, D" in text
    assert "1 malformed question (" in text
    assert "1.txt question 2: expected a question and 4 option texts" in text
    assert f"1 not JSON ({broken}:1: Expecting ',' delimiter)" in text
    assert f"1 invalid UTF-8 ({latin1}: byte 0xe9 at offset 16)" in text


def test_json_lines_files_are_read_too(tmp_path):
    lines = "\n".join(json.dumps(doc([a], id_=f"{a}.txt")) for a in "ABC")
    write_doc(tmp_path, "test/high/1.txt", lines.encode())
    examples = race.RaceProcessor(high_only=True).get_test_examples(tmp_path)
    assert [e.label for e in examples] == [0, 1, 2]


def test_missing_folders_and_empty_data_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        race.RaceProcessor().get_train_examples(tmp_path)
    assert str(tmp_path / "RACE" / "train" / "middle") in str(error.value)
    assert "--data_dir is the folder that holds RACE/" in str(error.value)
    with pytest.raises(FileNotFoundError, match="looks like the RACE folder itself"):
        race.RaceProcessor().get_train_examples(RACE_ROOT / "RACE")
    # Only the selected level has to exist.
    write_doc(tmp_path, "train/high/1.txt", doc(["A", "B"], questions=None))
    assert len(race.RaceProcessor(high_only=True).get_train_examples(tmp_path)) == 2
    (tmp_path / "RACE" / "train" / "middle").mkdir()
    with pytest.raises(race.RaceDataError, match=r"no usable RACE train question .*"
                       r"levels: middle; 0 \.txt file"):
        race.RaceProcessor(middle_only=True).get_train_examples(tmp_path)


def test_cache_reuse_and_invalidation(tmp_path, tokenizer):
    data, cache = tmp_path / "data", tmp_path / "cache"
    for path in (RACE_ROOT / "RACE" / "dev").rglob("*.txt"):
        write_doc(data, path.relative_to(RACE_ROOT / "RACE"), path.read_bytes())
    first = race.cached_race_records("dev", data, cache, tokenizer, 32, 8)
    assert (not first.reused, first.num_examples) == (True, 3)
    assert first.path == str(cache / "race_eval.tf_record")
    settings = json.loads((cache / "race_eval.tf_record.meta.json").read_text())["settings"]
    assert (settings["max_seq_length"], settings["max_qa_length"]) == (32, 8)
    assert settings["levels"] == ["middle", "high"] and settings["num_files"] == 2
    assert race.cached_race_records("dev", data, cache, tokenizer, 32, 8).reused
    assert not race.cached_race_records("dev", data, cache, tokenizer, 32, 6).reused
    high = race.cached_race_records("dev", data, cache, tokenizer, 32, 6, high_only=True)
    assert high.path.endswith("race_high_eval.tf_record") and high.num_examples == 2
    # An edited file is noticed.
    write_doc(data, "dev/middle/1.txt", doc(["A", "B"]))
    changed = race.cached_race_records("dev", data, cache, tokenizer, 32, 6)
    assert not changed.reused and changed.num_examples == 4
    (batch,) = choice_records.choice_dataset(changed.path, 32, 8, training=False)
    assert batch["input_ids"].shape[:2] == (4, 4) and batch["label_ids"].dtype == tf.int32
    assert sorted(os.listdir(cache)) == [
        "race_eval.tf_record", "race_eval.tf_record.meta.json",
        "race_high_eval.tf_record", "race_high_eval.tf_record.meta.json"]


def test_the_cache_keeps_what_max_seq_length_cut(tmp_path, tokenizer):
    """The dev articles of 13, 18 and 18 pieces beside options cut to 8: at
    max_seq_length 24 (21 pieces for both) the two of 18 lose 5 each; the count is kept
    beside the records and comes back with them."""
    first = race.cached_race_records("dev", RACE_ROOT, tmp_path, tokenizer, 24, 8)
    expected = {"max_seq_length": 24, "examples": 3, "examples_cut": 2,
                "pieces_dropped": 10, "longest": 18 + 8 + 3}
    assert not first.reused and first.truncated.to_json() == expected
    again = race.cached_race_records("dev", RACE_ROOT, tmp_path, tokenizer, 24, 8)
    assert again.reused and again.truncated.to_json() == expected
    # records cached before the count was kept: reused as they are, the count unknown
    meta = tmp_path / "race_eval.tf_record.meta.json"
    info = json.loads(meta.read_text())
    del info["truncated"]
    meta.write_text(json.dumps(info))
    old = race.cached_race_records("dev", RACE_ROOT, tmp_path, tokenizer, 24, 8)
    assert old.reused and old.truncated is None
