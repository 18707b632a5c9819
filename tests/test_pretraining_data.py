"""Pretraining data creation end to end (`create_pretraining_data.py`,
`albert_tf.data.pretraining`: corpus, chunks, workers, create): reading the corpus,
consistent records, determinism whatever the workers, bad input. The steps have their
own files: `test_masking`, `test_pretraining_instances`,
`test_pretraining_example_encoder`, `test_pretraining_reader`."""

import logging
import pathlib
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import masking
from albert_tf.data import pretraining as pt
from albert_tf.data.report import SkipLog, TooManySkipped
from tests.helpers.forked import run_python
from tests.helpers.masking_checks import SIGMAS, words_of
from tests.helpers.paths import ALICE, SHARED_DATA, SPM_MODEL
from tests.helpers.pretraining_data import config, spm_spec_of

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_TEXT = SHARED_DATA / "text"
CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def spm_spec():
    return spm_spec_of()


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


# ---------------------------------------------------------------- reading text

def test_read_chunks_keeps_documents_whole_and_counts_lines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\r\nc d\r\n\r\n\r\ne f\r\n\r\n" + b"g\n" * 30)
    skips = SkipLog("input line")
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
    command = [ROOT / "create_pretraining_data.py", f"--input_file={ALICE}",
               f"--output_file={out}/pt.tfrecord@3",
               f"--spm_model_file={SPM_MODEL}", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=3", "--num_workers=2",
               "--chunk_bytes=3000"]
    result = run_python(command, cwd=tmp_path, timeout=120)
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
    alice_lines = [line for line in good.decode().splitlines() if line.strip()]
    alice_documents = len([p for p in re.split(r"\n\s*\n", good.decode()) if p.strip()])
    # Lines read: 2 good + 2 bad + 2 zero-width + the excerpt's; past the limit (1 bad
    # line), nothing is written.
    with pytest.raises(TooManySkipped, match=(
            rf"the input text has too many bad rows: skipped 2 of {6 + len(alice_lines)} "
            r"input line\(s\): 1 invalid UTF-8 \(.*bad.txt:2: byte 0xff at column 1\), 1 "
            r"line too long \(.*bad.txt:5: longer than 400 bytes\)\. "
            r"--max_skipped_rows=1 allows 1 row\(s\)")):
        pt.create_pretraining_data(str(path), str(tmp_path / "ok.tfrecord"), spm_spec,
                                   config(max_line_bytes=400), num_workers=0,
                                   max_skipped_rows="1")
    assert list(tmp_path.iterdir()) == [path]
    with caplog.at_level(logging.WARNING):
        stats = pt.create_pretraining_data(
            str(path), str(tmp_path / "ok.tfrecord"), spm_spec,
            config(max_line_bytes=400), num_workers=0, max_skipped_rows="2")
    # two zero-width spaces
    assert f"1 no tokens ({path}:7: document without tokens)" in caplog.text
    assert f"skipped 1 of {2 + alice_documents} document(s)" in caplog.text
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
    command = [ROOT / "create_pretraining_data.py", "--input_file=missing_dir/*.txt",
               f"--output_file={tmp_path}/o",
               f"--spm_model_file={SPM_MODEL}"]
    result = run_python(command, timeout=120)
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


