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
