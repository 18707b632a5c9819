"""SQuAD v1.1 / v2.0 examples, features, records and cache (albert_tf.data.squad).

Fixtures: `fixtures/squad/*-excerpt.json` are a few paragraphs (questions capped at 8 per
paragraph) of the official dev-v1.1 and dev-v2.0 files; the test at the end also checks
a few hundred questions of the full files when ../shared is present.
"""

import json
import logging
import os
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad
from albert_tf.tokenization import FullTokenizer, encode_pieces, preprocess_text

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SPM_MODEL = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
V1_EXCERPT = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
V2_EXCERPT = FIXTURES / "squad" / "dev-v2.0-excerpt.json"
SHARED_SQUAD = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "squad"
CLS_ID, SEP_ID = 2, 3


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


def _questions(path):
    data = json.loads(pathlib.Path(path).read_text("utf-8"))["data"]
    return [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]


def _convert(tokenizer, path, is_training, **settings):
    examples = squad.read_squad_examples(path, is_training=is_training)
    settings = {"max_seq_length": 384, "doc_stride": 128, "max_query_length": 64, **settings}
    features = squad.convert_examples_to_features(
        examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
        settings["max_query_length"], is_training)
    return examples, features


def _decode(tokenizer, ids):
    return tokenizer.sp_model.DecodeIds([int(i) for i in ids])


def _normalized(tokenizer, text):
    """The answer as its ids read back: preprocessed, normalized by the model, unknown
    pieces as the model decodes them."""
    return _decode(tokenizer, tokenizer.encode(text)).strip()


# ------------------------------------------------------------------------------ reading
@pytest.mark.parametrize("path", [V1_EXCERPT, V2_EXCERPT])
def test_read_examples_training_and_eval(path):
    questions = _questions(path)
    train = squad.read_squad_examples(path, is_training=True)
    evaluation = squad.read_squad_examples(str(path), is_training=False)
    assert [e.qas_id for e in train] == [qa["id"] for _, qa in questions]
    assert [e.qas_id for e in evaluation] == [qa["id"] for _, qa in questions]
    for example, (context, qa) in zip(train, questions):
        assert example.paragraph_text == context
        assert example.question_text == qa["question"]
        assert example.is_impossible == qa.get("is_impossible", False)
        if example.is_impossible:
            assert (example.orig_answer_text, example.start_position) == ("", -1)
            assert example.answers == ()
        else:
            first = qa["answers"][0]
            assert example.orig_answer_text == first["text"]
            assert example.start_position == first["answer_start"]
            assert example.answers == tuple(a["text"] for a in qa["answers"])
    for example in evaluation:
        assert example.start_position is None and example.orig_answer_text is None
    if path == V2_EXCERPT:
        assert any(e.is_impossible for e in train) and not all(e.is_impossible for e in train)


# ------------------------------------------------------------------------ the alignment
def _literal_lcs(orig, tok, max_dist):
    """The original's recurrence, cell by cell, with a dict of back-pointers."""
    n, m = len(orig), len(tok)
    f, g = {}, {}
    for i in range(n):
        for j in range(i - max_dist, i + max_dist):
            if j < 0 or j >= m:
                continue
            value = 0
            if i > 0:
                g[i, j] = 0
                value = f.get((i - 1, j), 0)
            if j > 0 and f.get((i, j - 1), 0) > value:
                g[i, j] = 1
                value = f[i, j - 1]
            diagonal = f.get((i - 1, j - 1), 0) if i > 0 and j > 0 else 0
            if orig[i] == tok[j] and diagonal + 1 > value:
                g[i, j] = 2
                value = diagonal + 1
            f[i, j] = value
    return f.get((n - 1, m - 1), 0), g


@pytest.mark.parametrize("seed", range(4))
def test_lcs_back_pointers_equal_the_literal_recurrence(seed):
    # Small alphabets: many ties between "up", "left" and "match", where the original's
    # order of preference decides the path.
    rng = np.random.default_rng(seed)
    orig = rng.integers(-1, 3, size=int(rng.integers(5, 60))).tolist()
    tok = rng.integers(0, 3, size=int(rng.integers(5, 60))).tolist()
    for max_dist in (2, abs(len(orig) - len(tok)) + 5, 70):
        score, back = squad._lcs_table(np.array(orig), np.array(tok), max_dist)
        literal_score, g = _literal_lcs(orig, tok, max_dist)
        assert score == literal_score
        table = {(i, j): int(back[i, j - i + max_dist]) for i in range(len(orig))
                 for j in range(i - max_dist, i + max_dist)
                 if 0 <= j < len(tok) and back[i, j - i + max_dist] >= 0}
        assert table == g


def _literal_align(paragraph, tokenizer):
    pieces = encode_pieces(tokenizer.sp_model, preprocess_text(paragraph, lower=True))
    tok_text = "".join(pieces).replace("▁", " ")
    orig = [preprocess_text(c, remove_space=False, lower=True) for c in paragraph]
    orig = [c if len(c) == 1 else None for c in orig]
    n, m = len(paragraph), len(tok_text)
    for max_dist in (abs(n - m) + 5, 2 * (abs(n - m) + 5)):
        score, g = _literal_lcs(orig, tok_text, max_dist)
        if score > 0.8 * n:
            break
    orig_to_tok, tok_to_orig = [-1] * n, [-1] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in g:
        if g[i, j] == 2:
            orig_to_tok[i], tok_to_orig[j] = j, i
            i, j = i - 1, j - 1
        elif g[i, j] == 1:
            j -= 1
        else:
            i -= 1
    return score, orig_to_tok, tok_to_orig


ALIGNMENT_CASES = [
    "  Hello   ``World''  café naïve — 1,000,000 people, in 1990, x  ",
    "The ﬁrst ﬂoor: Ｆｕｌｌ width, ½ cup and e\u0301 here.",
    # Ligatures widen the pieces' text, combining marks shrink it: the first band is too
    # narrow and the original's second pass (twice as wide) is needed.
    "\ufb01" * 8 + " hello there my friend, this is a normal sentence"
    + "e\u0301" * 8 + " end of the text here",
]


@pytest.mark.parametrize("case", range(len(ALIGNMENT_CASES) + 2))
def test_alignment_equals_the_literal_recurrence(tokenizer, case):
    if case < len(ALIGNMENT_CASES):
        paragraph = ALIGNMENT_CASES[case]
    else:
        paragraph = _questions([V1_EXCERPT, V2_EXCERPT][case - len(ALIGNMENT_CASES)])[-1][0]
    score, orig_to_tok, tok_to_orig = _literal_align(paragraph, tokenizer)
    alignment = squad.align_paragraph(paragraph, tokenizer.sp_model, lower=True)
    assert score > 0.8 * len(paragraph) and alignment is not None
    assert alignment.orig_to_chartok_index.tolist() == orig_to_tok
    pieces = tokenizer.tokenize(tokenizer.preprocess(paragraph))
    assert alignment.piece_ids.tolist() == tokenizer.convert_tokens_to_ids(pieces)
    # Each piece's first / last character: mapped directly where the piece's own first /
    # last character was matched.
    position = 0
    for k, piece in enumerate(pieces):
        first, last = position, position + len(piece) - 1
        if tok_to_orig[first] >= 0:
            assert alignment.tok_start_to_orig_index[k] == tok_to_orig[first]
        if tok_to_orig[last] >= 0:
            assert alignment.tok_end_to_orig_index[k] == tok_to_orig[last]
        position += len(piece)


def test_convert_index_takes_the_neighbours():
    index = [-1, 2, -1, 5, -1]
    assert squad._convert_index(index, 1) == 2
    # Nothing mapped before: start at 0, end just before the first mapped position.
    assert squad._convert_index(index, 0, is_start=True) == 0
    assert squad._convert_index(index, 0, is_start=False) == 1
    # Between 2 and 5: the positions strictly between them.
    assert squad._convert_index(index, 2, is_start=True) == 3
    assert squad._convert_index(index, 2, is_start=False) == 4
    # Nothing mapped after: up to m - 1 when m is known.
    assert squad._convert_index(index, 4, m=10, is_start=True) == 6
    assert squad._convert_index(index, 4, m=10, is_start=False) == 9
    assert squad._convert_index(index, 4, is_start=True) == 5
    # Adjacent neighbours leave no room: start takes the right one, end the left one.
    assert squad._convert_index([1, -1, 2], 1, is_start=True) == 2
    assert squad._convert_index([1, -1, 2], 1, is_start=False) == 1


def test_unalignable_paragraph_is_skipped_with_a_warning(tokenizer, caplog):
    # Every letter is a ligature: per character it normalizes to two, so nothing matches.
    examples = [
        squad.SquadExample("q-ligatures", "what?", "\ufb01\ufb01\ufb01\ufb01 \ufb01\ufb01"),
        squad.SquadExample("q-fine", "what is this?", "This is a fine paragraph."),
    ]
    with caplog.at_level(logging.WARNING):
        features = squad.convert_examples_to_features(examples, tokenizer, 64, 16, 16, False)
    assert [f.qas_id for f in features] == ["q-fine"]
    assert "q-ligatures" in caplog.text


# ----------------------------------------------------------------------------- features
@pytest.mark.parametrize("path", [V1_EXCERPT, V2_EXCERPT])
def test_answer_positions_cover_exactly_the_answer(tokenizer, path):
    examples, features = _convert(tokenizer, path, is_training=True)
    exact = answerable = 0
    answered = set()
    for feature in features:
        example = examples[feature.example_index]
        if feature.is_impossible:
            assert feature.start_position == feature.end_position == 0
            continue
        answered.add(feature.example_index)
        answerable += 1
        s, e = feature.start_position, feature.end_position
        assert feature.doc_offset <= s <= e < feature.doc_offset + feature.doc_length
        # The pieces spell the answer (as the tokenizer normalizes it).
        decoded = _decode(tokenizer, feature.input_ids[s:e + 1])
        assert _normalized(tokenizer, example.orig_answer_text) in decoded
        # In characters: the pieces cover the answer, and would not without their first
        # or their last piece.
        answer_first = example.start_position
        answer_last = answer_first + len(example.orig_answer_text) - 1
        starts = feature.tok_start_to_orig_index
        ends = feature.tok_end_to_orig_index
        d = feature.doc_offset
        assert starts[s - d] <= answer_first and ends[e - d] >= answer_last
        if s < e:
            assert starts[s + 1 - d] > answer_first and ends[e - 1 - d] < answer_last
        text = squad.span_text(feature, example.paragraph_text, s, e)
        assert example.orig_answer_text in text
        exact += text == example.orig_answer_text
    # Every answerable question has a window with its answer.
    assert answered == {i for i, ex in enumerate(examples) if not ex.is_impossible}
    assert exact >= 0.9 * answerable


def test_v2_unanswerable_questions_point_at_cls(tokenizer):
    examples, features = _convert(tokenizer, V2_EXCERPT, is_training=True)
    impossible = {i for i, e in enumerate(examples) if e.is_impossible}
    assert impossible
    for feature in features:
        if feature.example_index in impossible:
            assert feature.is_impossible
            assert feature.start_position == feature.end_position == 0
    assert {f.example_index for f in features} == set(range(len(examples)))


def test_feature_layout_and_p_mask(tokenizer):
    examples, features = _convert(tokenizer, V2_EXCERPT, is_training=False,
                                  max_seq_length=256, max_query_length=8)
    for feature in features:
        example = examples[feature.example_index]
        query = tokenizer.encode(example.question_text)[:8]
        d = feature.doc_offset
        n = d + feature.doc_length + 1  # real length
        assert d == len(query) + 2
        ids = feature.input_ids
        assert ids[0] == CLS_ID and ids[d - 1] == SEP_ID and ids[n - 1] == SEP_ID
        assert ids[1:d - 1].tolist() == query
        assert (ids[n:] == 0).all()
        assert feature.input_mask.tolist() == [1] * n + [0] * (256 - n)
        assert feature.segment_ids.tolist() == [0] * d + [1] * (n - d) + [0] * (256 - n)
        # 0 for [CLS] and the paragraph's pieces; 1 for the question, both [SEP] and
        # the padding.
        assert feature.p_mask.tolist() == (
            [0] + [1] * (d - 1) + [0] * feature.doc_length + [1] * (256 - n + 1))
        assert feature.start_position is None and feature.end_position is None
        assert all(len(x) == 256 for x in (ids, feature.input_mask, feature.p_mask))
    # Ids number the features from 1000000000 in order.
    assert [f.unique_id for f in features] == list(
        range(squad.FIRST_UNIQUE_ID, squad.FIRST_UNIQUE_ID + len(features)))


def test_max_query_length_truncates_the_question(tokenizer):
    long_question = "what " * 50 + "is it?"
    example = squad.SquadExample("q", long_question, "It is a test paragraph.")
    (feature,) = squad.convert_examples_to_features([example], tokenizer, 64, 16, 10, False)
    assert feature.doc_offset == 12
    assert feature.input_ids[1:11].tolist() == tokenizer.encode(long_question)[:10]


def test_doc_spans_and_max_context_by_hand():
    assert squad.doc_spans(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
    assert squad.doc_spans(10, 4, 8) == [(0, 4), (4, 4), (8, 2)]  # stride capped by length
    assert squad.doc_spans(3, 4, 2) == [(0, 3)]
    spans = squad.doc_spans(10, 4, 2)
    # Piece 3: window 0 has 3 left / 0 right, window 1 has 1 left / 2 right.
    assert squad.max_context_span(spans, 3) == 1
    assert squad.max_context_span(spans, 5) == 2
    assert squad.max_context_span(spans, 0) == 0
    assert squad.max_context_span(spans, 9) == 3
    # Ties go to the first window; then the longer window wins an equal shorter side.
    spans = squad.doc_spans(9, 5, 2)
    assert spans == [(0, 5), (2, 5), (4, 5)]
    assert squad.max_context_span(spans, 3) == 0  # 1 + 0.05 in windows 0 and 1
    assert squad.max_context_span(spans, 5) == 1  # 1 + 0.05 in windows 1 and 2
    assert squad.max_context_span([(0, 4), (1, 3)], 2) == 0  # 1.04 beats 1.03
    assert squad.max_context_span([(0, 3), (1, 4)], 2) == 1  # 1.04 beats 1.03


def test_long_paragraph_windows(tokenizer):
    sentences = [f"Sentence number {k} tells about the river number {k}." for k in range(40)]
    paragraph = " ".join(sentences)
    answer = "river number 23"
    start = paragraph.index(answer)
    example = squad.SquadExample("long", "Which river?", paragraph, answer, start)
    max_seq_length, doc_stride = 64, 20
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length, doc_stride, 16, True)
    pieces = tokenizer.encode(paragraph)
    d = features[0].doc_offset
    budget = max_seq_length - d - 1
    assert len(features) > 5
    # Windows start every doc_stride pieces, fill the budget, and the last one ends at
    # the paragraph's end.
    for k, feature in enumerate(features):
        assert feature.doc_span_index == k and feature.doc_span_start == k * doc_stride
        window = feature.input_ids[d:d + feature.doc_length].tolist()
        assert window == pieces[feature.doc_span_start:feature.doc_span_start + len(window)]
        assert feature.doc_length == (budget if k < len(features) - 1
                                      else len(pieces) - feature.doc_span_start)
    assert features[-1].doc_span_start + features[-1].doc_length == len(pieces)
    # Every piece is "max context" in exactly one window: one where it has the most
    # context on its shorter side.
    for p in range(len(pieces)):
        holders = [f for f in features
                   if f.doc_span_start <= p < f.doc_span_start + f.doc_length]
        flagged = [f for f in holders if f.token_is_max_context[p - f.doc_span_start]]
        assert len(flagged) == 1
        (best,) = flagged
        assert best.is_max_context(p - best.doc_span_start + d)

        def shorter_side(f):
            return min(p - f.doc_span_start, f.doc_span_start + f.doc_length - 1 - p)
        assert shorter_side(best) == max(shorter_side(f) for f in holders)
    # Windows with the whole answer point at it; the others are "no answer" (v1 too).
    with_answer = [f for f in features if not f.is_impossible]
    assert with_answer
    for feature in features:
        if feature.is_impossible:
            assert feature.start_position == feature.end_position == 0
            continue
        text = squad.span_text(feature, paragraph, feature.start_position,
                               feature.end_position)
        assert text == answer
    # ... and they are exactly the windows that hold the answer's pieces.
    answer_first = with_answer[0].start_position - d + with_answer[0].doc_span_start
    answer_last = with_answer[0].end_position - d + with_answer[0].doc_span_start
    covering = [f for f in features if f.doc_span_start <= answer_first
                and answer_last < f.doc_span_start + f.doc_length]
    assert covering == with_answer
    assert [f.unique_id for f in features] == list(
        range(squad.FIRST_UNIQUE_ID, squad.FIRST_UNIQUE_ID + len(features)))


def test_span_text_rejects_positions_outside_the_window(tokenizer):
    examples, features = _convert(tokenizer, V1_EXCERPT, is_training=False)
    feature = features[0]
    paragraph = examples[feature.example_index].paragraph_text
    d, n = feature.doc_offset, feature.doc_length
    assert squad.span_text(feature, paragraph, d, d + n - 1) == paragraph.strip()
    for start, end in [(0, d), (d - 1, d), (d, d + n), (d + 2, d + 1)]:
        with pytest.raises(ValueError, match="not a span"):
            squad.span_text(feature, paragraph, start, end)


def test_wordpiece_tokenizer_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    examples = squad.read_squad_examples(V1_EXCERPT, is_training=False)
    with pytest.raises(squad.SquadError, match="SentencePiece"):
        squad.convert_examples_to_features(
            examples, FullTokenizer(vocab_file=str(vocab)), 384, 128, 64, False)
    with pytest.raises(squad.SquadError, match="max_query_length"):
        squad.convert_examples_to_features(examples, None, 64, 128, 64, False)


# ---------------------------------------------------------------------------- bad input
def _squad_bytes(paragraphs) -> bytes:
    return json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]},
                      ensure_ascii=False).encode("utf-8")


def test_bad_questions_are_skipped_naming_file_and_id(tmp_path, caplog):
    context = "The cat sat on the mat in 1990."
    good = {"id": "good", "question": "Where did the cat sit?",
            "answers": [{"text": "the mat", "answer_start": 15}]}
    paragraphs = [{"context": context, "qas": [
        good,
        {"id": "bad-offset", "question": "When?",
         "answers": [{"text": "1990", "answer_start": 3}]},
        {"id": "no-question", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "bad-start", "question": "Who?",
         "answers": [{"text": "cat", "answer_start": "4"}]},
        {"id": "no-answer", "question": "Who?", "answers": []},
        {"id": "good", "question": "Again?",
         "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "impossible", "question": "Why?", "answers": [], "is_impossible": True},
        {"question": "no id", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "NONUTF8", "question": "Who?",
         "answers": [{"text": "cat", "answer_start": 4}]},
    ]}, {"context": "NONUTF8 context", "qas": [{"id": "in-bad-context", "question": "?",
                                                 "answers": []}]}]
    raw = _squad_bytes(paragraphs)
    # Raw bytes that are not UTF-8 in one question's text and in one context.
    raw = raw.replace(b'"question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]}, '
                      b'{"id": "NONUTF8"', b'"question": "Who?", "answers": [{"text": "cat", '
                      b'"answer_start": 4}]}, {"id": "NONUTF8"', 1)
    raw = raw.replace(b'"id": "NONUTF8", "question": "Who?"',
                      b'"id": "bad-bytes", "question": "Wh\xff\xfeo?"')
    raw = raw.replace(b'"context": "NONUTF8 context"', b'"context": "caf\xe9 context"')
    path = tmp_path / "bad.json"
    path.write_bytes(raw)

    with caplog.at_level(logging.WARNING):
        examples = squad.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["good", "impossible"]
    for qid in ["bad-offset", "no-question", "bad-start", "no-answer", "bad-bytes",
                "in-bad-context"]:
        assert f"question id '{qid}'" in caplog.text, qid
    assert str(path) in caplog.text
    assert "not at offset 3" in caplog.text and "duplicate" in caplog.text
    assert "qas[7]" in caplog.text  # the question without an id, by position
    assert "skipped 8 of 10" in caplog.text

    # Without training, answers are not needed.
    evaluation = squad.read_squad_examples(path, is_training=False)
    assert [e.qas_id for e in evaluation] == ["good", "bad-offset", "bad-start", "no-answer",
                                              "impossible"]


def test_nothing_usable_or_no_file_is_a_clear_error(tmp_path):
    path = tmp_path / "all_bad.json"
    path.write_bytes(_squad_bytes([{"context": "Some text.", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "nope", "answer_start": 0}]}]}]))
    with pytest.raises(squad.SquadError, match=f"{path}.*no usable question"):
        squad.read_squad_examples(path, is_training=True)
    assert len(squad.read_squad_examples(path, is_training=False)) == 1
    missing = tmp_path / "missing.json"
    with pytest.raises(squad.SquadError, match=f"{missing} does not exist"):
        squad.read_squad_examples(missing, is_training=False)
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [')
    with pytest.raises(squad.SquadError, match=f"{broken} is not valid JSON"):
        squad.read_squad_examples(broken, is_training=False)
    broken.write_text('{"version": "1.1"}')
    with pytest.raises(squad.SquadError, match="not a SQuAD file"):
        squad.read_squad_examples(broken, is_training=False)


# ------------------------------------------------------------------------------ records
ORIGINAL_TRAINING_NAMES = {"unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask",
                           "start_positions", "end_positions", "is_impossible"}


@pytest.mark.parametrize("is_training", [True, False])
def test_record_round_trip(tokenizer, tmp_path, is_training):
    max_seq_length = 256
    _, features = _convert(tokenizer, V2_EXCERPT, is_training, max_seq_length=max_seq_length)
    path = tmp_path / "features.tfrecord"
    assert squad.write_features(path, features, is_training) == len(features)
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]

    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(str(path)))).numpy())
    names = set(first.features.feature)
    assert names == (ORIGINAL_TRAINING_NAMES if is_training
                     else ORIGINAL_TRAINING_NAMES - {"start_positions", "end_positions",
                                                     "is_impossible"})

    batch_size = 3
    rows = 0
    lengths = []
    for batch in squad.squad_dataset(path, max_seq_length, batch_size,
                                     is_training=is_training, training=False):
        chunk = features[rows:rows + len(batch["unique_ids"])]
        width = max(int(f.input_mask.sum()) for f in chunk)
        lengths.append(width)
        assert batch["unique_ids"].numpy().tolist() == [f.unique_id for f in chunk]
        for name in squad.SEQUENCE_FEATURES:
            # Trimmed and re-padded, the batch equals the original fixed-length arrays
            # cut at the batch's longest (p_mask pads with 1 as the original does).
            assert batch[name].dtype == tf.int32
            np.testing.assert_array_equal(
                batch[name].numpy(), np.stack([getattr(f, name)[:width] for f in chunk]))
        if is_training:
            assert batch["start_positions"].numpy().tolist() == [f.start_position for f in chunk]
            assert batch["end_positions"].numpy().tolist() == [f.end_position for f in chunk]
            assert batch["is_impossible"].numpy().tolist() == [int(f.is_impossible)
                                                               for f in chunk]
        rows += len(chunk)
    assert rows == len(features)
    assert min(lengths) < max(lengths) < max_seq_length  # padded per batch

    arrays = squad.read_feature_records(path, max_seq_length, is_training)
    np.testing.assert_array_equal(arrays["p_mask"], np.stack([f.p_mask for f in features]))


def test_bucketed_batches_pad_p_mask_with_one(tokenizer, tmp_path):
    _, features = _convert(tokenizer, V1_EXCERPT, True, max_seq_length=256)
    path = tmp_path / "features.tfrecord"
    squad.write_features(path, features, is_training=True)
    by_id = {f.unique_id: f for f in features}
    seen = []
    for batch in squad.squad_dataset(path, 256, 4, is_training=True, training=False,
                                     bucket_boundaries=[160, 200]):
        width = batch["p_mask"].shape[1]
        for row, unique_id in enumerate(batch["unique_ids"].numpy().tolist()):
            feature = by_id[unique_id]
            np.testing.assert_array_equal(batch["p_mask"][row], feature.p_mask[:width])
            np.testing.assert_array_equal(batch["input_ids"][row], feature.input_ids[:width])
            seen.append(unique_id)
    assert sorted(seen) == sorted(by_id)


def test_training_records_need_positions(tokenizer, tmp_path):
    _, features = _convert(tokenizer, V1_EXCERPT, is_training=False)
    path = tmp_path / "x.tfrecord"
    with pytest.raises(squad.SquadError, match="no answer positions"):
        squad.write_features(path, features, is_training=True)
    assert not os.listdir(tmp_path)  # nothing half-written


def test_shuffled_training_order_is_the_original_seeded_one():
    examples = squad.read_squad_examples(V1_EXCERPT, is_training=True)
    shuffled = squad.shuffle_examples(examples)
    assert sorted(e.qas_id for e in shuffled) == sorted(e.qas_id for e in examples)
    assert [e.qas_id for e in shuffled] != [e.qas_id for e in examples]
    assert [e.qas_id for e in squad.shuffle_examples(examples, 12345)] == [
        e.qas_id for e in shuffled]


# -------------------------------------------------------------------------------- cache
def test_cache_reuses_and_rebuilds(tokenizer, tmp_path):
    source = tmp_path / "dev.json"
    shutil.copy(V2_EXCERPT, source)
    record_file = tmp_path / "cache" / "eval.tfrecord"
    settings = {"max_seq_length": 128, "doc_stride": 48, "max_query_length": 32}

    built = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                         **settings)
    assert built.rebuilt and built.num_features == len(built.features)
    meta = json.loads(pathlib.Path(built.meta_file).read_text())  # JSON, not pickle
    assert meta["settings"]["doc_stride"] == 48 and meta["num_features"] == built.num_features

    direct = squad.convert_examples_to_features(built.examples, tokenizer, 128, 48, 32, False)
    cached = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                          **settings)
    assert not cached.rebuilt
    assert len(cached.features) == len(direct)
    for a, b in zip(cached.features, direct):
        for field in ("unique_id", "example_index", "qas_id", "doc_span_index",
                      "doc_span_start", "doc_offset", "tok_start_to_orig_index",
                      "tok_end_to_orig_index", "token_is_max_context", "is_impossible"):
            assert getattr(a, field) == getattr(b, field), field
        for name in squad.SEQUENCE_FEATURES:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    feature = cached.features[-1]
    paragraph = cached.examples[feature.example_index].paragraph_text
    last = feature.doc_offset + feature.doc_length - 1
    assert squad.span_text(feature, paragraph, feature.doc_offset, last) == squad.span_text(
        direct[-1], paragraph, feature.doc_offset, last)

    # A changed setting, a changed input, a replaced record file: rebuilt.
    again = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                         **{**settings, "doc_stride": 24})
    assert again.rebuilt and again.num_features > built.num_features
    data = json.loads(source.read_text("utf-8"))
    data["data"] = data["data"][:1]
    source.write_text(json.dumps(data))
    smaller = squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                           **settings)
    assert smaller.rebuilt and smaller.num_features < built.num_features
    with open(record_file, "ab") as f:
        f.write(b"\0")
    assert squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                        **settings).rebuilt
    os.remove(str(record_file) + squad.META_SUFFIX)
    assert squad.load_or_build_features(source, tokenizer, record_file, is_training=False,
                                        **settings).rebuilt
    assert sorted(os.listdir(record_file.parent)) == ["eval.tfrecord",
                                                       "eval.tfrecord.meta.json"]


def test_training_cache_records_settings_not_offsets(tokenizer, tmp_path):
    record_file = tmp_path / "train.tfrecord"
    built = squad.load_or_build_features(V1_EXCERPT, tokenizer, record_file, is_training=True,
                                         shuffle_seed=squad.ORIGINAL_TRAIN_SHUFFLE_SEED)
    assert built.features is None and built.rebuilt
    assert [e.qas_id for e in built.examples] == [e.qas_id for e in squad.shuffle_examples(
        squad.read_squad_examples(V1_EXCERPT, is_training=True))]
    meta = json.loads(pathlib.Path(built.meta_file).read_text())
    assert meta["features"] is None and meta["settings"]["shuffle_seed"] == 12345
    arrays = squad.read_feature_records(record_file, 384, is_training=True)
    assert len(arrays["unique_ids"]) == built.num_features
    assert not squad.load_or_build_features(
        V1_EXCERPT, tokenizer, record_file, is_training=True, shuffle_seed=12345).rebuilt
    # Asking for post-processing data the cache lacks rebuilds it.
    kept = squad.load_or_build_features(V1_EXCERPT, tokenizer, record_file, is_training=True,
                                        shuffle_seed=12345, keep_features=True)
    assert kept.rebuilt and len(kept.features) == built.num_features


# ------------------------------------------------------------------ the real dev sets
@pytest.mark.skipif(not SHARED_SQUAD.is_dir(), reason="../shared/data/squad is absent")
@pytest.mark.parametrize("name", ["dev-v1.1.json", "dev-v2.0-half.json"])
def test_real_dev_questions_recover_their_answers(tokenizer, tmp_path, name):
    """A few hundred questions of the official files: every answer is in a window and
    the predicted span of its gold positions reads back as the answer."""
    data = json.loads((SHARED_SQUAD / name).read_text("utf-8"))
    # One paragraph from each article in turn, until 300 questions.
    kept, count = [], 0
    for article in data["data"]:
        for paragraph in article["paragraphs"][:3]:
            kept.append({"title": article["title"], "paragraphs": [paragraph]})
            count += len(paragraph["qas"])
        if count >= 300:
            break
    path = tmp_path / name
    path.write_text(json.dumps({"version": data["version"], "data": kept}))
    examples, features = _convert(tokenizer, path, is_training=True)
    assert len(examples) == count
    answerable = {i for i, e in enumerate(examples) if not e.is_impossible}
    covered, exact, positive = set(), 0, 0
    for feature in features:
        if feature.is_impossible:
            continue
        example = examples[feature.example_index]
        text = squad.span_text(feature, example.paragraph_text, feature.start_position,
                               feature.end_position)
        assert example.orig_answer_text in text
        covered.add(feature.example_index)
        positive += 1
        exact += text == example.orig_answer_text
    assert covered == answerable
    # The rest are answers that end inside a piece ("2" of "2½"): the span reads "2½".
    assert exact >= 0.95 * positive
