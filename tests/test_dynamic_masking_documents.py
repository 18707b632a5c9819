"""Documents for dynamic masking (`albert_tf.data.dynamic_masking.documents`): text
split and tokenized in the graph as the original reads it, WordPiece included."""


import numpy as np

from albert_tf import tokenization
from albert_tf.data import dynamic_masking as dm


def test_wordpiece_vocabularies(tmp_path):
    from albert_tf.text import AlbertTextTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alice", "fell", "down", "a", "deep",
         "well", "the", "rabbit", "##s", "run", "##ning", "un", "##bel", "##iev", "##ably",
         ".", ","]) + "\n", encoding="utf-8")
    python = tokenization.FullTokenizer(vocab_file=str(vocab))
    graph = AlbertTextTokenizer(vocab_file=str(vocab))
    lines = ["Alice fell down a deep well.", "   ", "The rabbits running, unbelievably.",
             "Alice fell.", "", "Rabbits running down."]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # Documents split at lines that are blank after str.strip (WordPiece: no
    # SentencePiece preprocessing).
    assert [d.to_list() for d in dm.text_documents(str(corpus), graph)] == [
        [python.encode(lines[0])], [python.encode(lines[2]), python.encode(lines[3])],
        [python.encode(lines[5])]]
    ids = np.array([[2] + python.encode(lines[2]) + [3] + python.encode(lines[5]) + [3]] * 500,
                   np.int32)
    segments = np.zeros_like(ids)
    masker = dm.DynamicMasker.from_tokenizer(graph, masked_lm_prob=0.3)
    out = masker(ids, segments, 2)
    pieces = python.convert_ids_to_tokens(ids[0])
    assert out["token_boundary"].numpy()[0].tolist() == [int(not p.startswith("##"))
                                                          for p in pieces]
    continuation = np.array([p.startswith("##") for p in pieces])
    masked = np.zeros(ids.shape, bool)
    weights = out["masked_lm_weights"].numpy() > 0
    for row in range(len(ids)):
        masked[row, out["masked_lm_positions"].numpy()[row][weights[row]]] = True
    # A "##" piece is masked exactly when the piece before it is.
    assert (masked[:, continuation] == masked[:, np.flatnonzero(continuation) - 1]).all()
    assert masked[:, continuation].any()


def test_text_documents_split_as_the_original(tokenizer, text_tokenizer, tmp_path):
    lines = ["", "First document, one.", "  Its second line. ", "", "", "\t ",
             "Second document.", "\u0301", "Third, after a line of accents only.",
             "", "Fourth document", "without a final blank line"]
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    expected, current = [], []
    for line in lines + [""]:  # the original's rule: empty after preprocessing ends one
        if not tokenizer.preprocess(line):
            if current:
                expected.append(current)
            current = []
        elif tokenizer.encode(line):
            current.append(tokenizer.encode(line))
    assert len(expected) == 4
    for block_lines in (2, 1024):  # documents cross blocks, or not
        found = [d.to_list() for d in dm.text_documents(str(path), text_tokenizer,
                                                        block_lines=block_lines)]
        assert found == expected


def test_unreadable_lines_are_skipped_counted_and_bounded(text_tokenizer, tmp_path):
    """A line that is not UTF-8 or holds a NUL byte is skipped in the graph as the
    Python readers skip it (no sentence, no document's end), counted by `check_text`
    with its file and line, and past --max_skipped_rows the corpus is refused."""
    import pytest

    from albert_tf.data.report import TooManySkipped

    good = [b"First document, one.", b"Its second line.", b"", b"Second document.",
            b"Its end."]
    bad = [good[0], b"caf\xe9 in Latin-1", good[1], b"", good[3], b"a NUL \x00 byte",
           b"\xff", good[4]]
    clean, messy = tmp_path / "clean.txt", tmp_path / "messy.txt"
    clean.write_bytes(b"\n".join(good) + b"\n")
    messy.write_bytes(b"\n".join(bad) + b"\n")
    documents = [[d.to_list() for d in dm.text_documents(str(path), text_tokenizer,
                                                         block_lines=block)]
                 for path in (clean, messy) for block in (2, 1024)]
    assert len(documents[0]) == 2 and all(d == documents[0] for d in documents)
    report = dm.check_text([str(messy)], max_skipped_rows="3")
    totals = report.totals("input")
    assert (totals["read"], totals["kept"], totals["skipped"]) == (7, 4, 3)
    assert report.to_json()["splits"]["input"]["skipped"] == {
        "invalid UTF-8": {"count": 2, "first": [f"{messy}:2", f"{messy}:7"]},
        "NUL byte": {"count": 1, "first": [f"{messy}:6"]}}
    with pytest.raises(TooManySkipped, match=r"the input text has too many bad rows: "
                                             r"skipped 3 of 7 input line"):
        dm.check_text([str(messy)])  # 1% of the lines


def test_a_corpus_is_scanned_once_while_unchanged(tmp_path, monkeypatch):
    """A run's training and evaluation streams come from the same text: its scan for
    unreadable lines reads it once, and again once a file changes."""
    from albert_tf.data.dynamic_masking import documents

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One line.\nAnother.\n", encoding="utf-8")
    scans = []
    monkeypatch.setattr(documents, "check_text", lambda *a: scans.append(a))
    for _ in range(3):
        documents.check_corpus([str(corpus)], "text", "0")
    assert len(scans) == 1
    corpus.write_text("One line, longer now.\n", encoding="utf-8")
    documents.check_corpus([str(corpus)], "text", "0")
    assert len(scans) == 2
