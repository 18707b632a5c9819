"""Examples -> features (albert_tf.data.squad.features): windows, packing, p_mask, answer
positions and `span_text`."""

import logging

import pytest

from albert_tf.data import squad
from albert_tf.tokenization import FullTokenizer, encode_pieces, preprocess_text
from tests.helpers.squad_data import (
    CLS_ID,
    SEP_ID,
    V1_EXCERPT,
    V2_EXCERPT,
    convert,
    sentencepiece_tokenizer,
)


@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


def _decode(tokenizer, ids):
    return tokenizer.sp_model.DecodeIds([int(i) for i in ids])


def _normalized(tokenizer, text):
    """The answer as its ids read back: preprocessed, normalized by the model, unknown
    pieces as the model decodes them."""
    return _decode(tokenizer, tokenizer.encode(text)).strip()


@pytest.mark.parametrize("path", [V1_EXCERPT, V2_EXCERPT])
def test_answer_positions_cover_exactly_the_answer(tokenizer, path):
    examples, features = convert(tokenizer, path, is_training=True)
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
    examples, features = convert(tokenizer, V2_EXCERPT, is_training=True)
    impossible = {i for i, e in enumerate(examples) if e.is_impossible}
    assert impossible
    for feature in features:
        if feature.example_index in impossible:
            assert feature.is_impossible
            assert feature.start_position == feature.end_position == 0
    assert {f.example_index for f in features} == set(range(len(examples)))


def test_feature_layout_and_p_mask(tokenizer):
    examples, features = convert(tokenizer, V2_EXCERPT, is_training=False,
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
    examples, features = convert(tokenizer, V1_EXCERPT, is_training=False)
    feature = features[0]
    paragraph = examples[feature.example_index].paragraph_text
    d, n = feature.doc_offset, feature.doc_length
    assert squad.span_text(feature, paragraph, d, d + n - 1) == paragraph.strip()
    for start, end in [(0, d), (d - 1, d), (d, d + n), (d + 2, d + 1)]:
        with pytest.raises(ValueError, match="not a span"):
            squad.span_text(feature, paragraph, start, end)


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


def test_wordpiece_tokenizer_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    examples = squad.read_squad_examples(V1_EXCERPT, is_training=False)
    with pytest.raises(squad.SquadError, match="SentencePiece"):
        squad.convert_examples_to_features(
            examples, FullTokenizer(vocab_file=str(vocab)), 384, 128, 64, False)
    with pytest.raises(squad.SquadError, match="max_query_length"):
        squad.convert_examples_to_features(examples, None, 64, 128, 64, False)


def test_quoted_answers_and_questions_keep_their_quotes(tokenizer):
    # ``quoted'', '' and curly quotes in the paragraph and the question: each answer is
    # found and read back exactly, and the question keeps its ' pieces (no ").
    paragraph = ("He called it ``the big one'' in 1990, and \u201cCurly\u201d said "
                 "it\u2019s ''fine'' now.")
    question = "What did he call ``it'' in \u201c1990\u201d, and what\u2019s ''fine''?"
    answers = ["the big one", "``the big one''", "\u201cCurly\u201d", "Curly", "it\u2019s",
               "''fine''", "fine"]
    examples = [squad.SquadExample(f"q{k}", question, paragraph, answer,
                                   paragraph.index(answer))
                for k, answer in enumerate(answers)]
    features = squad.convert_examples_to_features(examples, tokenizer, 64, 16, 32, True)
    assert [f.example_index for f in features] == list(range(len(answers)))
    sp_model = tokenizer.sp_model
    question_pieces = encode_pieces(sp_model, preprocess_text(question, lower=True))
    assert "``" in question_pieces and question_pieces.count("'") == 6
    for feature, answer in zip(features, answers):
        assert not feature.is_impossible
        assert squad.span_text(feature, paragraph, feature.start_position,
                               feature.end_position) == answer
        question_ids = feature.input_ids[1:feature.doc_offset - 1].tolist()
        assert question_ids == [sp_model.PieceToId(p) for p in question_pieces]
        assert question_ids.count(sp_model.PieceToId("'")) == 6
        assert sp_model.PieceToId('"') not in question_ids
