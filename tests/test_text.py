"""In-graph tokenization (`albert_tf.text`): the Python tokenizer's ids and pieces'
offsets, in tf.data and in a SavedModel."""

import unicodedata

import pytest
import tensorflow as tf

from albert_tf.text import AlbertTextTokenizer
from albert_tf.tokenization import FullTokenizer, TokenizerError, preprocess_text
from tests.helpers.paths import (
    FIXTURES,
    REAL_TEXT,
    SHARED_DATA,
    SHARED_STEP,
    SPM_MODEL,
    shared_sample,
)
from tests.helpers.text_cases import EDGE_CASES, ORIGINAL_PIECES, make_wordpiece_vocab

SHARED = SHARED_DATA
SPM_MODEL = str(SPM_MODEL)


def test_graph_equals_python_on_real_and_edge_text(spm_tokenizer, spm_graph):
    texts = REAL_TEXT + EDGE_CASES
    graph_ids = spm_graph.tokenize(texts).to_list()
    mismatches = [(t, g, spm_tokenizer.encode(t)) for t, g in zip(texts, graph_ids)
                  if g != spm_tokenizer.encode(t)]
    assert not mismatches, mismatches[:3]
    assert sum(len(g) for g in graph_ids) > 9_000  # real work was compared


def test_graph_drops_invalid_utf8_like_python(spm_tokenizer, spm_graph):
    raw = b"valid \xff\xfe bytes \xc3"
    assert spm_graph.tokenize(tf.constant(raw)).numpy().tolist() == spm_tokenizer.encode(raw)


def test_graph_wordpiece_equals_python(tmp_path):
    chinese = ["中文的句子，还有标点。", "我们在北京大学学习自然语言处理",
               "混合 English 和中文 text"]
    texts = REAL_TEXT[:200] + EDGE_CASES + chinese
    vocab = make_wordpiece_vocab(tmp_path / "vocab.txt", REAL_TEXT[:100] + chinese[:1])
    for lower in (True, False):
        python = FullTokenizer(vocab_file=vocab, do_lower_case=lower)
        graph = AlbertTextTokenizer(vocab_file=vocab, do_lower_case=lower)
        graph_ids = graph.tokenize(texts).to_list()
        mismatches = [(t, g, python.encode(t)) for t, g in zip(texts, graph_ids)
                      if g != python.encode(t)]
        assert not mismatches, mismatches[:3]
    assert any(python.vocab["[UNK]"] in ids for ids in graph_ids)  # unknowns exercised


def test_graph_tokenizer_runs_in_tf_data(spm_tokenizer, spm_graph):
    dataset = tf.data.Dataset.from_tensor_slices(REAL_TEXT[:40]).batch(8).map(
        spm_graph.tokenize)
    ids = [row for batch in dataset for row in batch.to_list()]
    assert ids == [spm_tokenizer.encode(t) for t in REAL_TEXT[:40]]


def test_graph_tokenizer_survives_a_savedmodel(tmp_path, spm_tokenizer, spm_graph):
    module = tf.Module()
    module.tokenizer = spm_graph
    module.encode = tf.function(
        lambda texts: spm_graph.tokenize(texts).to_tensor(),
        input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    ids = loaded.encode(tf.constant(["This is a test", "in 1990, then"])).numpy()
    assert ids[0, :4].tolist() == [48, 25, 21, 1289]
    assert ids[1][ids[1] != 0].tolist() == spm_tokenizer.encode("in 1990, then")


@pytest.mark.skipif(not (SHARED / "squad" / "dev-v1.1.json").exists(),
                    reason="the shared SQuAD and GLUE data are not beside the repo")
def test_graph_equals_python_on_shared_squad_and_glue(spm_tokenizer, spm_graph):
    import json

    squad = json.loads((SHARED / "squad" / "dev-v1.1.json").read_text())
    texts = []
    for article in squad["data"][:12]:
        for paragraph in article["paragraphs"]:
            texts.append(paragraph["context"])
            texts += [qa["question"] for qa in paragraph["qas"]]
    for task, column in (("SST-2", 0), ("RTE", 1), ("MRPC", 3)):
        rows = (SHARED / "glue" / task / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
        texts += [row.split("\t")[column] for row in rows]
    graph_ids = spm_graph.tokenize(texts).to_list()
    mismatches = [t for t, g in zip(texts, graph_ids) if g != spm_tokenizer.encode(t)]
    assert not mismatches, mismatches[:3]
    assert len(texts) > 3000


def test_graph_gives_the_originals_pieces_for_quotes(spm_graph):
    cases = ORIGINAL_PIECES["texts"]
    assert spm_graph.tokenize([c["text"] for c in cases]).to_list() == [c["ids"] for c in cases]


# ------------------------------------------------------------------- offsets
QUOTES = "e\u0301cole  ``x'' ```y" + "'" * 3
OFFSET_CASES = EDGE_CASES + ["hello 北京上海 x 😀😀 ok", QUOTES, "2½ ⅓ … ɐ̯", "  pad  "]


@pytest.fixture(scope="module")
def offsets_graph():
    return AlbertTextTokenizer(spm_model_file=SPM_MODEL, do_lower_case=True,
                               with_offsets=True)


def piece_spans(graph, texts):
    ids, starts, ends = graph.tokenize_with_offsets(texts)
    return [list(zip(i, s, e)) for i, s, e in zip(ids.to_list(), starts.to_list(),
                                                   ends.to_list())]


def test_offsets_give_each_pieces_raw_text(spm_tokenizer, offsets_graph):
    texts = OFFSET_CASES + REAL_TEXT
    spans = piece_spans(offsets_graph, texts)
    for text, row in zip(texts, spans):
        assert [i for i, _, _ in row] == spm_tokenizer.encode(text), text
        starts = [a for _, a, _ in row]
        ends = [b for _, _, b in row]
        # In order and inside the text (pieces of one character, "½" -> "1⁄2", share it).
        assert starts == sorted(starts) and ends == sorted(ends), (text, row)
        assert all(0 <= a <= b <= len(text) for a, b in zip(starts, ends)), (text, row)
    sp = spm_tokenizer.sp_model
    shown = {t: [(sp.IdToPiece(i), t[a:b]) for i, a, b in row]
             for t, row in zip(texts, spans)}
    assert shown["hello 北京上海 x 😀😀 ok"] == [
        ("▁hello", "hello"), ("▁", ""), ("<unk>", "北京上海"), ("▁x", "x"), ("▁", ""),
        ("<unk>", "😀😀"), ("▁ok", "ok")]
    assert shown[QUOTES] == [  # a detached accent; quotes kept as they are (the original)
        ("▁ecole", "e\u0301cole"), ("▁", ""), ("<unk>", "``"), ("x", "x"), ("'", "'"),
        ("'", "'"), ("▁", ""), ("<unk>", "```"), ("y", "y"), ("'", "'"), ("'", "'"),
        ("'", "'")]
    assert shown["It cost 1,000, or 2,5, in 1990, then"][2:12] == [  # digit-comma re-split
        ("▁1,000", "1,000"), (",", ","), ("▁or", "or"), ("▁2", "2"), (",", ","),
        ("5", "5"), (",", ","), ("▁in", "in"), ("▁1990", "1990"), (",", ",")]
    assert shown["2½ ⅓ … ɐ̯"][:3] == [("▁21", "2½"), ("<unk>", "½"), ("2", "½")]
    assert shown["  pad  "] == [("▁pad", "pad")]
    assert piece_spans(offsets_graph, [""]) == [[]]
    assert piece_spans(offsets_graph, []) == []  # a batch of no texts


def test_stored_character_classes_are_this_pythons():
    """The classes every tokenizer graph reads are those computed from this Python's
    `unicodedata` (stored, so that no process computes them again)."""
    import json

    from albert_tf.text import unicode_classes

    with open(unicode_classes.CHARACTER_CLASSES_FILE, encoding="utf-8") as f:
        stored = json.load(f)
    version = unicodedata.unidata_version
    assert version in stored, (
        f"{unicode_classes.CHARACTER_CLASSES_FILE} lacks Unicode {version}: "
        "run python -m albert_tf.text")
    assert stored[version] == unicode_classes.computed_character_classes()
    assert unicode_classes.character_classes() == stored[version]


def test_preprocessed_lengths_are_the_preprocessed_texts():
    from albert_tf.text.offsets import preprocessed_lengths

    texts = OFFSET_CASES + REAL_TEXT
    for lower in (True, False):
        lengths = preprocessed_lengths(tf.constant(texts), lower)[0].to_list()
        for text, row in zip(texts, lengths):
            assert len(row) == len(text)
            assert sum(row) == len(preprocess_text(text, lower=lower).encode()), text


def assert_spans_match_the_original(contexts, spm_tokenizer, offsets_graph):
    """Each piece's text is the original run_squad alignment's (stripped), but for
    zero-width characters, which the original keeps in a span and ours leaves out, and
    lone ▁ pieces, which hold no text here. Returns the number of pieces compared."""
    from albert_tf.data.squad import align_paragraph

    sp = spm_tokenizer.sp_model
    compared = 0
    for context, row in zip(contexts, piece_spans(offsets_graph, contexts)):
        alignment = align_paragraph(context, sp, lower=True)
        if alignment is None:  # the original gives up on this paragraph
            continue
        assert [i for i, _, _ in row] == alignment.piece_ids.tolist()
        for k, (piece_id, start, end) in enumerate(row):
            if sp.IdToPiece(piece_id) == "▁":
                assert start == end
                continue
            want = context[alignment.tok_start_to_orig_index[k]:
                           alignment.tok_end_to_orig_index[k] + 1].strip()
            want = "".join(c for c in want if unicodedata.category(c) != "Cf")
            got = context[start:end]
            # Ours also keeps a combining mark that follows the piece's last letter.
            assert got == want or got.rstrip("\u032f\u0301") == want, \
                (context[max(start - 20, 0):end + 20], got, want)
            compared += 1
    return compared


def test_offsets_agree_with_the_originals_squad_alignment(spm_tokenizer, offsets_graph):
    import json

    contexts = [p["context"] for name in ("dev-v1.1-excerpt.json", "dev-v2.0-excerpt.json")
                for a in json.loads((FIXTURES / "squad" / name).read_text())["data"]
                for p in a["paragraphs"]]
    assert assert_spans_match_the_original(contexts, spm_tokenizer, offsets_graph) > 1500


@pytest.mark.skipif(not (SHARED / "squad" / "dev-v1.1.json").exists(),
                    reason="the shared SQuAD data are not beside the repo")
def test_offsets_agree_with_the_original_on_every_shared_squad_context(
        spm_tokenizer, offsets_graph):
    import json

    contexts = []
    for name in ("dev-v1.1.json", "dev-v2.0-half.json"):
        for article in json.loads((SHARED / "squad" / name).read_text())["data"]:
            contexts += [p["context"] for p in article["paragraphs"]]
    contexts = shared_sample(list(dict.fromkeys(contexts)))
    assert assert_spans_match_the_original(contexts, spm_tokenizer, offsets_graph) > \
        300_000 // SHARED_STEP


def test_offsets_need_sentencepiece_and_the_flag(tmp_path, offsets_graph, spm_graph):
    vocab = make_wordpiece_vocab(tmp_path / "vocab.txt", REAL_TEXT[:10])
    with pytest.raises(TokenizerError, match="SentencePiece models only"):
        AlbertTextTokenizer(vocab_file=vocab, with_offsets=True)
    with pytest.raises(TokenizerError, match="with_offsets=True"):
        spm_graph.tokenize_with_offsets(["text"])
    ids, starts, ends = offsets_graph.tokenize_with_offsets("One text.")
    assert ids.numpy().tolist() == offsets_graph.tokenize("One text.").numpy().tolist()
    assert starts.numpy().tolist() == [0, 4, 8] and ends.numpy().tolist() == [3, 8, 9]


def test_graph_tokenizer_refuses_bpe_models(tmp_path):
    import sentencepiece as spm

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(REAL_TEXT[:200]), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "bpe"),
                                   model_type="bpe", vocab_size=300, num_threads=1,
                                   control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                                   minloglevel=2)
    with pytest.raises(TokenizerError, match="BPE SentencePiece model"):
        AlbertTextTokenizer(spm_model_file=str(tmp_path / "bpe.model"))
