"""Pretraining data creation (`create_pretraining_data.py`, `albert_tf.data.pretraining`):
pairs and truncation as the original draws them, its record format, reading the corpus,
determinism, bad input, and the tf.data reader. The masking rules are
`test_masking.py`'s."""

import logging
import pathlib
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import masking, records
from albert_tf.data import pretraining as pt
from albert_tf.data.pretraining import instances as pt_instances
from albert_tf.tokenization import FullTokenizer
from tests.helpers.masking_checks import SIGMAS, within, words_of
from tests.helpers.paths import ALICE, SPM_MODEL

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_TEXT = pathlib.Path("/work/shared/data/text")
CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(spm_model_file=str(SPM_MODEL))


@pytest.fixture(scope="module")
def spm_spec():
    return pt.TokenizerSpec(spm_model_file=str(SPM_MODEL))


def config(**overrides):
    settings = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
    settings.update(overrides)
    return pt.PretrainingDataConfig(**settings)


def read_records(paths, max_seq_length=64, max_predictions=10):
    """All records of `paths` (in file order) as numpy arrays keyed by feature name."""
    spec = pt.pretraining_feature_spec(max_seq_length, max_predictions)
    batches = [{k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
               for batch in tf.data.TFRecordDataset([str(p) for p in paths]).batch(10_000)]
    return {k: np.concatenate([b[k] for b in batches]) for k in spec}


def write_corpus(path, documents, newline="\n"):
    """Documents (lists of lines) separated by blank lines."""
    text = (newline * 2).join(newline.join(doc) for doc in documents) + newline
    path.write_text(text, encoding="utf-8")
    return path


def temp_files(directory):
    return [p.name for p in pathlib.Path(directory).rglob("*") if ".tmp-" in p.name]


# ------------------------------------------------------------- instance creation

def test_truncation_counts_match_one_at_a_time_truncation():
    expected = np.zeros([13, 13, 26, 2], np.int64)
    for len_a in range(1, 14):
        for len_b in range(1, 14):
            for max_tokens in range(2, 28):
                a, b = len_a, len_b
                cut_a = cut_b = 0
                while a + b > max_tokens:  # the original: cut the longer, B on ties
                    if a > b:
                        a, cut_a = a - 1, cut_a + 1
                    else:
                        b, cut_b = b - 1, cut_b + 1
                assert pt.truncation_counts(len_a, len_b, max_tokens) == (cut_a, cut_b)
                expected[len_a - 1, len_b - 1, max_tokens - 2] = cut_a, cut_b
    # The same counts for arrays (the instance maker truncates a pass's pairs at once).
    len_a, len_b, max_tokens = np.meshgrid(np.arange(1, 14), np.arange(1, 14),
                                           np.arange(2, 28), indexing="ij")
    cuts = pt.truncation_counts(len_a, len_b, max_tokens)
    np.testing.assert_array_equal(np.stack(cuts, axis=-1), expected)


def test_truncation_cuts_front_or_back_with_equal_chance():
    rng = np.random.default_rng(4)
    tokens = np.arange(10)
    fronts = []
    for _ in range(4000):
        kept = pt_instances._cut(tokens, 3, rng)
        assert len(kept) == 7 and np.all(np.diff(kept) == 1)  # a contiguous slice
        fronts.append(kept[0])
    assert within(np.mean(fronts) / 3, 0.5, 3 * 4000)


def synthetic_documents(num_docs, lines_per_doc, line_length, rng):
    """Documents whose every token id tells (document, position in document)."""
    documents = []
    for d in range(num_docs):
        lengths = rng.integers(1, 2 * line_length, size=lines_per_doc)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        documents.append([np.arange(offsets[i], offsets[i + 1], dtype=np.int32)
                          + 100_000 * (d + 1) for i in range(lines_per_doc)])
    return documents


def origin(tokens):
    """(document, first position, last position) of a run of synthetic ids."""
    docs = set((tokens // 100_000).tolist())
    assert len(docs) == 1, "a segment mixes documents"
    return docs.pop(), int((tokens % 100_000).min()), int((tokens % 100_000).max())


@pytest.mark.parametrize("random_next_sentence", [False, True])
def test_sentence_order_and_next_sentence_labels_mean_what_they_say(
        tokenizer, random_next_sentence):
    maker = pt.InstanceMaker(tokenizer, config(
        max_seq_length=40, random_next_sentence=random_next_sentence, short_seq_prob=0.0))
    rng, np_rng = random.Random(5), np.random.default_rng(5)
    documents = synthetic_documents(30, 12, 6, np_rng)
    kinds = {"in_order": 0, "swapped": 0, "other_doc": 0}
    multi_segment = swapped_or_random = 0
    for _ in range(20):
        for index in range(len(documents)):
            for pair in maker.segment_pairs(documents, index, rng, np_rng):
                doc_a, first_a, last_a = origin(pair.tokens_a)
                doc_b, first_b, last_b = origin(pair.tokens_b)
                assert len(pair.tokens_a) + len(pair.tokens_b) <= 37
                # Each segment is one stretch of its document (ends may be truncated).
                assert last_a - first_a + 1 == len(pair.tokens_a)
                assert last_b - first_b + 1 == len(pair.tokens_b)
                if doc_a != doc_b:
                    kind = "other_doc"
                elif last_a < first_b:
                    kind = "in_order"
                else:
                    assert last_b < first_a
                    kind = "swapped"
                kinds[kind] += 1
                assert pair.is_random_next == (kind != "in_order"), kind
                if random_next_sentence:
                    assert kind != "swapped"
                if kind != "other_doc" or random_next_sentence:
                    multi_segment += 1
                    swapped_or_random += pair.is_random_next
    if random_next_sentence:
        assert kinds["other_doc"] > 0 and kinds["swapped"] == 0
    else:
        # Only a one-segment chunk (a document's last line on its own) takes B from
        # another document in SOP mode.
        assert 0 < kinds["other_doc"] < kinds["swapped"]
    # Among pairs where the coin decides, half are negatives.
    assert within(swapped_or_random / multi_segment, 0.5, multi_segment)


def test_short_seq_prob_gives_uniform_short_targets(tokenizer):
    # One-token lines: a document's first pair has exactly `target` tokens.
    maker = pt.InstanceMaker(tokenizer, config(max_seq_length=64, short_seq_prob=0.3))
    rng, np_rng = random.Random(6), np.random.default_rng(6)
    document = [np.array([i], np.int32) for i in range(200)]
    lengths = []
    for _ in range(3000):
        pair = maker.segment_pairs([document], 0, rng, np_rng)[0]
        lengths.append(len(pair.tokens_a) + len(pair.tokens_b))
    lengths = np.array(lengths)
    max_num_tokens = 61
    assert lengths.min() >= 2 and lengths.max() == max_num_tokens
    short = lengths[lengths < max_num_tokens]
    # P(full) = 1 - p + p / 60 (a short target may also be 61).
    assert within(np.mean(lengths == max_num_tokens), 0.7 + 0.3 / 60, len(lengths))
    assert abs(short.mean() - 31) < SIGMAS * np.sqrt((59 ** 2 - 1) / 12 / len(short))
    never_short = pt.InstanceMaker(tokenizer, config(max_seq_length=64, short_seq_prob=0.0))
    assert all(len(p.tokens_a) + len(p.tokens_b) == max_num_tokens
               for p in never_short.segment_pairs([document], 0, rng, np_rng)[:-1])


# ------------------------------------------------------------------ record format

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


# ---------------------------------------------------------------- reading text

def test_read_chunks_keeps_documents_whole_and_counts_lines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\r\nc d\r\n\r\n\r\ne f\r\n\r\n" + b"g\n" * 30)
    skips = records.SkipLog("input")
    chunks = list(pt.read_chunks([str(path)], chunk_bytes=8, max_line_bytes=100,
                                 skips=skips))
    documents = [d for c in chunks for d in c.documents]
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert [d.line_numbers for d in documents[:2]] == [[1, 2], [5]]
    assert documents[0].where() == f"{path}:1"
    # The last document (30 lines of 2 bytes) is cut every 8 bytes: 4 lines.
    assert [len(d.lines) for d in documents[2:]] == [4] * 7 + [2]
    assert all(len(c.documents) >= 1 for c in chunks) and skips.count == 0


def test_fast_tokenization_equals_the_tokenizer(tokenizer, spm_spec):
    processor = pt.ChunkProcessor(spm_spec, config())
    lines = ALICE.read_text(encoding="utf-8").splitlines() + [
        "In 1990, 27,000 people -- and 3,5 more,", "``Quoted'' text", "Café  Crème\tÉTÉ",
        "naïve 12, 13,14", "  MIXED Case  ", "x1, y2,", "日本語のテキスト, 2020,"]
    for line in lines:
        assert processor.encode(processor.preprocess(line)) == tokenizer.encode(line), line


@pytest.mark.skipif(not SHARED_TEXT.is_dir(), reason="shared data not available")
def test_fast_tokenization_equals_the_tokenizer_on_real_text(tokenizer, spm_spec):
    processor = pt.ChunkProcessor(spm_spec, config())
    path = SHARED_TEXT / "gutenberg" / "pg1661.txt"  # numbers with commas, accents
    lines = path.read_text(encoding="utf-8").splitlines()[:4000]
    for line in lines:
        assert processor.encode(processor.preprocess(line)) == tokenizer.encode(line), line


# ------------------------------------------------------------------- end to end

def test_script_writes_sharded_records(tmp_path, spm_spec):
    out = tmp_path / "out"
    command = [sys.executable, str(ROOT / "create_pretraining_data.py"),
               f"--input_file={ALICE}", f"--output_file={out}/pt.tfrecord@3",
               f"--spm_model_file={SPM_MODEL}", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=3", "--num_workers=2",
               "--chunk_bytes=3000"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    shards = sorted(out.iterdir())
    assert [p.name for p in shards] == [f"pt.tfrecord-0000{i}-of-00003" for i in range(3)]
    counts = [sum(1 for _ in tf.data.TFRecordDataset(str(p))) for p in shards]
    assert max(counts) - min(counts) <= 1 and sum(counts) > 150  # in turn, as the original
    assert "instances/s" in result.stderr
    # The script and the library (in this process, no workers) write the same bytes.
    stats = pt.create_pretraining_data(str(ALICE), f"{tmp_path}/lib.tfrecord@3", spm_spec,
                                       config(dupe_factor=3, chunk_bytes=3000),
                                       num_workers=0)
    assert stats.num_instances == sum(counts) and stats.num_chunks > 2
    for ours, lib in zip(shards, stats.output_files):
        assert ours.read_bytes() == pathlib.Path(lib).read_bytes()


def test_records_are_consistent_instances(tmp_path, spm_spec, tokenizer):
    stats = pt.create_pretraining_data(str(ALICE), str(tmp_path / "r.tfrecord"), spm_spec,
                                       config(dupe_factor=4), num_workers=0)
    f = read_records(stats.output_files)
    n = stats.num_instances
    lengths = f["input_mask"].sum(1)
    positions = np.arange(64)
    for i in range(n):
        length = lengths[i]
        np.testing.assert_array_equal(f["input_mask"][i], positions < length)
        for name in ("input_ids", "segment_ids", "token_boundary"):
            assert not f[name][i, length:].any(), name
        ids, segments = f["input_ids"][i], f["segment_ids"][i]
        k = int(f["masked_lm_weights"][i].sum())
        masked = f["masked_lm_positions"][i, :k]
        np.testing.assert_array_equal(f["masked_lm_weights"][i], np.arange(10) < k)
        assert not f["masked_lm_positions"][i, k:].any() and not f["masked_lm_ids"][i, k:].any()
        assert 1 <= k <= masking.num_to_predict(length, 0.15, 10)
        a_end = int((segments[:length] == 0).sum())  # [CLS] A [SEP]
        assert ids[0] == CLS and segments[a_end:length].all()
        seps = set(np.flatnonzero(ids[:length] == SEP)) - set(masked.tolist())
        assert seps == {a_end - 1, length - 1}
        assert f["token_boundary"][i, [0, a_end - 1, length - 1]].all()
        words = words_of(length, np.isin(ids, [CLS, SEP]) & ~np.isin(positions, masked),
                         f["token_boundary"][i])
        masked_words = {words[p] for p in masked.tolist()}
        assert all((p in masked) == (w in masked_words) for p, w in words.items())
    assert set(np.unique(f["next_sentence_labels"])) == {0, 1}
    assert f["input_ids"].max() < tokenizer.vocab_size


def test_same_seed_same_bytes_whatever_the_workers(tmp_path, spm_spec):
    settings = config(chunk_bytes=2000, dupe_factor=2)
    runs = {}
    for workers in (0, 1, 2):
        stats = pt.create_pretraining_data(str(ALICE), f"{tmp_path}/w{workers}@2", spm_spec,
                                           settings, num_workers=workers)
        runs[workers] = [pathlib.Path(p).read_bytes() for p in stats.output_files]
    assert stats.num_chunks > 4
    assert runs[0] == runs[1] == runs[2]
    other = pt.create_pretraining_data(str(ALICE), f"{tmp_path}/seed@2", spm_spec,
                                       config(chunk_bytes=2000, random_seed=1), num_workers=0)
    assert [pathlib.Path(p).read_bytes() for p in other.output_files] != runs[0]
    assert temp_files(tmp_path) == []


def test_sop_labels_are_balanced_in_records(tmp_path, spm_spec):
    # Long documents (the whole excerpt as one): one-segment chunks are rare, so the
    # labels are the sentence-order coin.
    text = ALICE.read_text(encoding="utf-8")
    path = tmp_path / "one_doc.txt"
    path.write_text("\n".join(line for line in text.splitlines() if line.strip()) + "\n",
                    encoding="utf-8")
    stats = pt.create_pretraining_data(str(path), str(tmp_path / "sop.tfrecord"), spm_spec,
                                       config(dupe_factor=30, short_seq_prob=0.0),
                                       num_workers=0)
    labels = read_records(stats.output_files)["next_sentence_labels"][:, 0]
    assert stats.num_documents == 1 and len(labels) > 600
    # Besides the coin, at most one instance per pass (the document's last line alone)
    # is forced to label 1.
    n, sigma = len(labels), 0.5 / np.sqrt(len(labels))
    assert 0.5 - SIGMAS * sigma <= labels.mean() <= 0.5 + SIGMAS * sigma + 30 / n


def test_wordpiece_vocabulary_marks_continuations(tmp_path):
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat",
              "on", "mat", "play", "run", "##s", "##ed", "##ing", ".", ","]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(pieces) + "\n", encoding="utf-8")
    words = ["the", "cats", "dog", "played", "playing", "sat", "on", "mats", "Plays", ","]
    rng = random.Random(8)
    corpus = write_corpus(tmp_path / "wp.txt", [
        [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + "."
         for _ in range(rng.randint(2, 6))] for _ in range(40)])
    stats = pt.create_pretraining_data(str(corpus), str(tmp_path / "wp.tfrecord"),
                                       pt.TokenizerSpec(vocab_file=str(vocab)),
                                       config(max_seq_length=32, max_predictions_per_seq=5),
                                       num_workers=0)
    f = read_records(stats.output_files, 32, 5)
    continuation = np.array([p.startswith("##") for p in pieces])
    for i in range(stats.num_instances):
        length = f["input_mask"][i].sum()
        ids = f["input_ids"][i, :length].copy()
        k = int(f["masked_lm_weights"][i].sum())
        ids[f["masked_lm_positions"][i, :k]] = f["masked_lm_ids"][i, :k]  # the originals
        np.testing.assert_array_equal(f["token_boundary"][i, :length], ~continuation[ids])
        assert 1 not in ids  # every word is in the vocabulary
    assert continuation[f["masked_lm_ids"][f["masked_lm_weights"] > 0]].any()


# ----------------------------------------------------------------- bad input

def test_bad_lines_and_empty_documents_are_skipped_with_warnings(tmp_path, spm_spec,
                                                                 caplog):
    path = tmp_path / "bad.txt"
    good = ALICE.read_bytes().replace(b"\r\n", b"\n")
    path.write_bytes(b"first line\n\xff\xfe broken line\nthird line\n\n"
                     + b"x" * 500 + b"\n\n\xe2\x80\x8b\n\xe2\x80\x8b\n\n" + good)
    with caplog.at_level(logging.WARNING):
        stats = pt.create_pretraining_data(
            str(path), str(tmp_path / "ok.tfrecord"), spm_spec,
            config(max_line_bytes=400), num_workers=0)
    messages = caplog.text
    assert f"{path}:2: not UTF-8" in messages
    assert f"{path}:5: line longer than 400 bytes" in messages
    assert f"{path}:7: document without tokens" in messages  # two zero-width spaces
    alice_lines = [line for line in good.decode().splitlines() if line.strip()]
    alice_documents = len([p for p in re.split(r"\n\s*\n", good.decode()) if p.strip()])
    # Lines read: 2 good + 2 bad + 2 zero-width + the excerpt's.
    assert f"skipped 2 of {6 + len(alice_lines)} input lines" in messages
    assert f"skipped 1 of {2 + alice_documents} documents" in messages
    assert stats.num_skipped == 3 and stats.num_documents == 1 + alice_documents


def test_corpus_with_nothing_usable_is_an_error_and_writes_nothing(tmp_path, spm_spec):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"\n\n   \n\xff\xff\n\xe2\x80\x8b\n")
    out = tmp_path / "out"
    with pytest.raises(pt.PretrainingDataError, match="no usable text in .*empty.txt"):
        pt.create_pretraining_data(str(path), f"{out}/x@2", spm_spec, config(),
                                   num_workers=0)
    assert not out.exists() or list(out.iterdir()) == []


def test_missing_inputs_and_bad_settings_fail_before_any_work(tmp_path, spm_spec):
    with pytest.raises(pt.PretrainingDataError, match=r"no file matches 'nowhere/\*.txt'"):
        pt.create_pretraining_data(f"{ALICE},nowhere/*.txt", str(tmp_path / "o"), spm_spec,
                                   config())
    with pytest.raises(pt.PretrainingDataError, match="max_seq_length must be at least 5"):
        pt.create_pretraining_data(str(ALICE), str(tmp_path / "o"), spm_spec,
                                   config(max_seq_length=4))
    with pytest.raises(FileNotFoundError, match="nowhere.model"):
        pt.create_pretraining_data(str(ALICE), str(tmp_path / "o"),
                                   pt.TokenizerSpec(spm_model_file="nowhere.model"), config())
    with pytest.raises(pt.PretrainingDataError, match="is also an input"):
        pt.create_pretraining_data(str(ALICE), str(ALICE), spm_spec, config())
    with pytest.raises(pt.PretrainingDataError, match="named twice"):
        pt.expand_output_files("a,b,a")
    assert pt.expand_output_files("d/x@2,y") == ["d/x-00000-of-00002", "d/x-00001-of-00002",
                                                 "y"]
    assert list(tmp_path.iterdir()) == []


def test_script_reports_missing_input_clearly(tmp_path):
    command = [sys.executable, str(ROOT / "create_pretraining_data.py"),
               "--input_file=missing_dir/*.txt", f"--output_file={tmp_path}/o",
               f"--spm_model_file={SPM_MODEL}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "no file matches 'missing_dir/*.txt'" in result.stderr.splitlines()[-1]


def test_failure_midway_leaves_no_temp_or_output_files(tmp_path, spm_spec, monkeypatch):
    original = pt.ChunkProcessor.__call__

    def fail_on_third_chunk(self, chunk):
        if chunk.index == 2:
            raise RuntimeError("disk on fire")
        return original(self, chunk)

    monkeypatch.setattr(pt.ChunkProcessor, "__call__", fail_on_third_chunk)
    with pytest.raises(RuntimeError, match="disk on fire"):
        pt.create_pretraining_data(str(ALICE), f"{tmp_path}/out/x@2", spm_spec,
                                   config(chunk_bytes=2000), num_workers=0)
    assert list((tmp_path / "out").iterdir()) == []


# -------------------------------------------------------------------- reader

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
