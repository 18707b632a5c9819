"""SQuAD scoring (albert_tf.evaluation.squad_metrics) and post-processing
(albert_tf.evaluation.squad_postprocess).

The scores are checked on hand-made cases worked out in the comments; the
post-processing on hand-made windows (a five-word paragraph, one piece per word) and on
the real features of `fixtures/squad/*-excerpt.json`, fed synthetic outputs that peak at
the gold answer's positions.
"""

import json
import math
import re

import numpy as np
import pytest

from albert_tf.data import squad
from albert_tf.evaluation import squad_metrics as sm
from albert_tf.evaluation import squad_postprocess as sp
from tests.helpers.squad_data import V1_EXCERPT, V2_EXCERPT, sentencepiece_tokenizer


# ============================================================================ scoring
def test_normalize_answer():
    assert sm.normalize_answer("The  Cat's hat!") == "cats hat"
    assert sm.normalize_answer("an apple a day, THE end") == "apple day end"
    # Articles only as whole words; punctuation only ASCII (as the official script).
    assert sm.normalize_answer("Theater and another") == "theater and another"
    assert sm.normalize_answer("1,000–2,000") == "1000–2000"
    assert sm.normalize_answer("  A.  ") == ""


def test_exact_match_and_f1_by_hand():
    assert sm.exact_match_score("The Eiffel Tower.", "eiffel tower") == 1
    assert sm.exact_match_score("Eiffel Towers", "eiffel tower") == 0
    # [big, red, dog] vs [red, dog, barked]: 2 common, P = R = 2/3.
    assert sm.f1_score("the big red dog", "Red dog barked") == pytest.approx(2 / 3)
    # Bags of tokens: [x, x, y] vs [x, y, y] share one x and one y.
    assert sm.f1_score("x x y", "x y y") == pytest.approx(2 / 3)
    # [denver, broncos] vs [broncos]: P = 1/2, R = 1 -> 2/3.
    assert sm.f1_score("Denver Broncos", "Broncos") == pytest.approx(2 / 3)
    assert sm.f1_score("Carolina", "Broncos") == 0.0
    # Empty answers: 0 in v1.1; in v2.0 two empty answers agree, one empty one does not.
    assert sm.f1_score("", "") == 0.0
    assert sm.f1_score_v2("", "") == 1.0
    assert sm.f1_score_v2("the", "") == 1.0  # normalizes to nothing
    assert sm.f1_score_v2("", "Broncos") == 0.0
    assert sm.f1_score_v2("Broncos", "") == 0.0
    assert sm.f1_score_v2("Denver Broncos", "Broncos") == pytest.approx(2 / 3)


def _document(questions):
    """A SQuAD document from (id, [answer texts], is_impossible)."""
    qas = [{"id": qid, "question": "?", "is_impossible": impossible,
            "answers": [{"text": t, "answer_start": 0} for t in answers]}
           for qid, answers, impossible in questions]
    return {"version": "x", "data": [{"title": "t", "paragraphs": [
        {"context": "some context", "qas": qas}]}]}


def test_evaluate_v1_takes_the_best_gold_answer(tmp_path):
    document = _document([
        ("q1", ["Denver Broncos", "Broncos", "the Broncos"], False),
        ("q2", ["Santa Clara, California", "Levi's Stadium"], False),
        ("q3", ["1,000"], False),
        ("q4", ["gold"], False),
    ])
    predictions = {"q1": "Broncos!", "q2": "Levi Stadium", "q3": "1000"}
    # q1: EM 1 (second answer), F1 1. q2: EM 0; F1 max(0, [levi, stadium] vs
    # [levis, stadium] = 1/2). q3: EM 1. q4: no prediction: 0.
    expected = {"exact_match": 100 * 2 / 4, "f1": 100 * 2.5 / 4}
    assert sm.evaluate_v1(document, predictions) == pytest.approx(expected)
    assert sm.evaluate_v1(document["data"], predictions) == pytest.approx(expected)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document))
    assert sm.evaluate_v1(path, predictions) == pytest.approx(expected)
    assert sm.evaluate_v1(str(path), predictions) == pytest.approx(expected)
    gold = {"q1": ["Broncos"], "q2": ["x"], "q3": ["1,000"], "q4": ["gold"]}
    assert sm.evaluate_v1(gold, predictions)["exact_match"] == pytest.approx(50.0)


def _v2_case():
    document = _document([
        ("q1", ["Denver Broncos", "Broncos"], False),  # pred right
        ("q2", [], True),                               # pred "" (right)
        ("q3", [], True),                               # pred text (wrong)
        ("q4", ["Santa Clara"], False),                 # pred "" (wrong)
        ("q5", ["Levi's Stadium"], False),              # pred half right (F1 1/2)
    ])
    predictions = {"q1": "the Broncos", "q2": "", "q3": "something", "q4": "",
                   "q5": "Levi Stadium"}
    return document, predictions


def test_evaluate_v2_no_answer_rules():
    document, predictions = _v2_case()
    result = sm.evaluate_v2(document, predictions)
    # exact: q1, q2 right; f1: q1 1, q2 1, q5 1/2.
    assert result == pytest.approx({
        "exact": 100 * 2 / 5, "f1": 100 * 2.5 / 5, "total": 5,
        "HasAns_exact": 100 * 1 / 3, "HasAns_f1": 100 * 1.5 / 3, "HasAns_total": 3,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"]
    # Gold answers that normalize to nothing are ignored: "The" alone counts as no gold
    # text, so only an empty prediction matches it (the question stays "HasAns").
    odd = _document([("q", ["The", "a"], False)])
    assert sm.evaluate_v2(odd, {"q": ""})["HasAns_exact"] == 100.0
    assert sm.evaluate_v2(odd, {"q": "the cat"})["exact"] == 0.0
    # Only one group: no keys for the other.
    assert "NoAns_total" not in sm.evaluate_v2(_document([("q", ["x"], False)]), {"q": "x"})


def test_evaluate_v2_thresholds_by_hand():
    document, predictions = _v2_case()
    na_probs = {"q1": 0.1, "q2": 0.3, "q3": 0.9, "q4": 0.8, "q5": 0.2}
    result = sm.evaluate_v2(document, predictions, na_probs)
    # Every value is under the default na_prob_thresh 1.0: scores unchanged.
    assert result["exact"] == pytest.approx(40.0) and result["f1"] == pytest.approx(50.0)
    # The sweep starts at "all no answer" = 2 right (q2, q3), then answers in na order:
    # q1 (+1) -> 3 | q5 (+0 exact, +1/2 f1) | q2 (answer "" stays right, +0) |
    # q4 (+0) | q3 (answer "something" becomes wrong, -1).
    assert result["best_exact"] == pytest.approx(100 * 3 / 5)
    assert result["best_exact_thresh"] == pytest.approx(0.1)
    assert result["best_f1"] == pytest.approx(100 * 3.5 / 5)
    assert result["best_f1_thresh"] == pytest.approx(0.2)
    # A lower na_prob_thresh: q3 (0.9) and q4 (0.8) count as "no answer": q3 right.
    lower = sm.evaluate_v2(document, predictions, na_probs, na_prob_thresh=0.5)
    assert lower["exact"] == pytest.approx(100 * 3 / 5)
    assert lower["NoAns_exact"] == pytest.approx(100.0)
    assert lower["HasAns_exact"] == pytest.approx(100 / 3)
    with pytest.raises(ValueError, match="na_probs has no value"):
        sm.evaluate_v2(document, predictions, {"q1": 0.0})


@pytest.mark.parametrize("seed", range(5))
def test_best_threshold_is_the_best_of_all_thresholds(seed):
    """best_* equals the maximum, over every threshold, of the thresholded score."""
    rng = np.random.default_rng(seed)
    questions, predictions, na_probs = [], {}, {}
    for k in range(30):
        qid = f"q{k}"
        has_answer = rng.random() < 0.6
        questions.append((qid, ["red fox"] if has_answer else [], not has_answer))
        predictions[qid] = str(rng.choice(["red fox", "red", "", "blue cat"]))
        na_probs[qid] = float(rng.normal())
    document = _document(questions)
    gold = sm.gold_answers(document)
    has = {q: bool(a) for q, a in gold.items()}
    exact, f1 = sm.raw_scores_v2(gold, predictions)
    result = sm.evaluate_v2(document, predictions, na_probs)
    for key, raw in (("exact", exact), ("f1", f1)):
        by_threshold = {}
        for t in [-math.inf] + sorted(na_probs.values()):
            scores = sm.apply_no_answer_threshold(raw, na_probs, has, t)
            by_threshold[t] = 100 * sum(scores.values()) / len(scores)
        assert result[f"best_{key}"] == pytest.approx(max(by_threshold.values()))
        if result[f"best_{key}"] > by_threshold[-math.inf] + 1e-9:
            assert by_threshold[result[f"best_{key}_thresh"]] == pytest.approx(
                result[f"best_{key}"])


def test_missing_predictions_count_as_wrong():
    document, predictions = _v2_case()
    del predictions["q2"]  # an unanswerable question that would have been right
    result = sm.evaluate_v2(document, predictions,
                            {"q1": 0.1, "q3": 0.9, "q4": 0.8, "q5": 0.2})
    assert result["total"] == 5
    assert result["exact"] == pytest.approx(20.0)
    assert result["NoAns_exact"] == 0.0
    # Not even "everything is no answer" makes it right: q3 alone then.
    assert result["best_exact"] == pytest.approx(100 * 2 / 5)


def test_gold_answers_from_examples_and_errors():
    examples = squad.read_squad_examples(V2_EXCERPT, is_training=False)
    gold = sm.gold_answers(examples)
    assert gold == sm.gold_answers(V2_EXCERPT)
    assert {q for q, a in gold.items() if not a} == {e.qas_id for e in examples
                                                      if e.is_impossible}
    with pytest.raises(ValueError, match="not SQuAD data"):
        sm.gold_answers([{"title": "no paragraphs"}])
    with pytest.raises(ValueError, match="no gold questions"):
        sm.evaluate_v1({}, {})


# ================================================================== post-processing
PARAGRAPH = "Alpha beta gamma, delta epsilon."
WORDS = [(m.start(), m.end() - 1) for m in re.finditer(r"\S+", PARAGRAPH)]
DOC_OFFSET = 3                        # [CLS] question-piece [SEP]
SEQ_LEN = DOC_OFFSET + len(WORDS) + 1  # ... window [SEP]


def _text(first_word, last_word):
    return PARAGRAPH[WORDS[first_word][0]:WORDS[last_word][1] + 1]


def _example(qas_id="q", answers=()):
    return squad.SquadExample(qas_id, "Which?", PARAGRAPH, answers=tuple(answers))


def _feature(unique_id, example_index=0, qas_id="q", max_context=None, span_index=0):
    """A window holding the whole paragraph, one piece per word."""
    p_mask = np.ones(SEQ_LEN, np.int32)
    p_mask[0] = 0
    p_mask[DOC_OFFSET:DOC_OFFSET + len(WORDS)] = 0
    return squad.SquadFeature(
        unique_id=unique_id, example_index=example_index, qas_id=qas_id,
        doc_span_index=span_index, doc_span_start=0, doc_offset=DOC_OFFSET,
        tok_start_to_orig_index=[s for s, _ in WORDS],
        tok_end_to_orig_index=[e for _, e in WORDS],
        token_is_max_context=list(max_context or [True] * len(WORDS)),
        input_ids=np.zeros(SEQ_LEN, np.int32), input_mask=np.ones(SEQ_LEN, np.int32),
        segment_ids=np.zeros(SEQ_LEN, np.int32), p_mask=p_mask)


def _logits(peaks, base=-10.0):
    values = np.full(SEQ_LEN, base, np.float32)
    for position, value in peaks.items():
        values[position] = value
    return values


def _word(position):
    return position - DOC_OFFSET


def test_best_indexes_and_softmax():
    assert sp.best_indexes([0.1, 3.0, -1.0, 3.0, 2.0], 3) == [1, 3, 4]
    assert sp.best_indexes([1.0, 2.0], 5) == [1, 0]
    probabilities = sp.softmax([1000.0, 1000.0, 999.0])  # no overflow
    assert probabilities == pytest.approx(
        [1 / (2 + math.exp(-1)), 1 / (2 + math.exp(-1)), math.exp(-1) / (2 + math.exp(-1))])
    assert sp.softmax([]) == []


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_best_size, max_answer_length", [(20, 30), (3, 30), (20, 2)])
def test_v1_nbest_is_the_best_valid_spans_in_order(seed, n_best_size, max_answer_length):
    rng = np.random.default_rng(seed)
    start, end = rng.normal(size=SEQ_LEN), rng.normal(size=SEQ_LEN)
    max_context = [True, True, False, True, True]
    feature = _feature(7, max_context=max_context)
    result = sp.postprocess_v1([_example()], [feature],
                               {7: {"start_logits": start, "end_logits": end}},
                               n_best_size=n_best_size, max_answer_length=max_answer_length)
    # Reference: every pair of the n best starts and n best ends (sorted by hand) that
    # lies in the paragraph, starts at a max-context piece, and is not too long.
    top_starts = sorted(range(SEQ_LEN), key=lambda i: -start[i])[:n_best_size]
    top_ends = sorted(range(SEQ_LEN), key=lambda i: -end[i])[:n_best_size]
    valid = [(start[s] + end[e], _text(_word(s), _word(e)), start[s], end[e])
             for s in top_starts for e in top_ends
             if 0 <= _word(s) <= _word(e) < len(WORDS) and max_context[_word(s)]
             and _word(e) - _word(s) < max_answer_length]
    valid.sort(key=lambda v: -v[0])
    # None left (few beams): the original's placeholder.
    expected = valid[:n_best_size] or [(0.0, "empty", 0.0, 0.0)]
    if n_best_size == 20:
        assert len(expected) >= 5
    entries = result.nbest["q"]
    assert [e["text"] for e in entries] == [v[1] for v in expected]
    assert [e["start_log_prob"] for e in entries] == pytest.approx([v[2] for v in expected])
    assert [e["end_log_prob"] for e in entries] == pytest.approx([v[3] for v in expected])
    assert len(entries) <= n_best_size
    probabilities = [e["probability"] for e in entries]
    assert sum(probabilities) == pytest.approx(1.0)
    assert probabilities == sorted(probabilities, reverse=True)
    assert result.predictions == {"q": entries[0]["text"]}
    assert result.null_odds is None


def test_v1_max_answer_length_and_max_context():
    example, feature = _example(), _feature(1, max_context=[True, False, True, True, True])
    # Best start at word 0, best end at word 4 (5 pieces); second-best end at word 1.
    outputs = {1: {"start_logits": _logits({3: 9.0, 4: 8.0}),
                   "end_logits": _logits({7: 9.0, 4: 5.0})}}
    long = sp.postprocess_v1([example], [feature], outputs, max_answer_length=5)
    assert long.predictions["q"] == PARAGRAPH.rstrip(".") + "."
    short = sp.postprocess_v1([example], [feature], outputs, max_answer_length=4)
    assert short.predictions["q"] == "Alpha beta"
    assert all(len(e["text"].split()) <= 4 for e in short.nbest["q"])
    # Word 1 ("beta") is not max-context in this window: no span starts there, however
    # strong its start score.
    outputs = {1: {"start_logits": _logits({4: 50.0, 5: 1.0}),
                   "end_logits": _logits({5: 9.0})}}
    result = sp.postprocess_v1([example], [feature], outputs)
    assert result.predictions["q"] == "gamma,"
    assert not any(e["text"].startswith("beta") for e in result.nbest["q"])


def test_v1_spans_outside_the_paragraph_and_the_placeholder():
    example, feature = _example(), _feature(1)
    # The best start and end are on [CLS], the question and the final [SEP]; with
    # n_best_size 2 no valid pair is left: the original's placeholder "empty".
    outputs = {1: {"start_logits": _logits({0: 9.0, 1: 8.0, 3: 1.0}),
                   "end_logits": _logits({SEQ_LEN - 1: 9.0, 2: 8.0, 4: 1.0})}}
    result = sp.postprocess_v1([example], [feature], outputs, n_best_size=2)
    assert result.nbest["q"] == [{"text": "empty", "probability": 1.0,
                                  "start_log_prob": 0.0, "end_log_prob": 0.0}]
    assert result.predictions["q"] == "empty"
    # With more candidates the valid span "Alpha beta" is found.
    result = sp.postprocess_v1([example], [feature], outputs, n_best_size=3)
    assert result.predictions["q"] == "Alpha beta"
    # The original's names for the v1 outputs are accepted too.
    renamed = {1: {"start_log_prob": outputs[1]["start_logits"],
                   "end_log_prob": outputs[1]["end_logits"]}}
    assert sp.postprocess_v1([example], [feature], renamed, n_best_size=3).nbest == result.nbest


def test_v1_windows_of_one_example_are_merged_and_texts_kept_once():
    examples = [_example("q0"), _example("q1")]
    features = [_feature(10, 0, "q0", span_index=0), _feature(11, 0, "q0", span_index=1),
                _feature(12, 1, "q1")]
    outputs = {
        # Both windows of q0 find "gamma," best; the second finds "delta" next.
        10: {"start_logits": _logits({5: 5.0}), "end_logits": _logits({5: 5.0})},
        11: {"start_logits": _logits({5: 4.0, 6: 3.0}),
             "end_logits": _logits({5: 4.0, 6: 3.0})},
        12: {"start_logits": _logits({7: 1.0}), "end_logits": _logits({7: 1.0})},
    }
    result = sp.postprocess_v1(examples, features, outputs, n_best_size=3)
    texts = [e["text"] for e in result.nbest["q0"]]
    assert texts == ["gamma,", "gamma, delta", "delta"]
    assert result.nbest["q0"][0]["start_log_prob"] == 5.0  # the better window's
    assert result.predictions == {"q0": "gamma,", "q1": "epsilon."}


def test_outputs_that_do_not_fit_are_clear_errors():
    example, feature = _example(), _feature(1)
    with pytest.raises(sp.SquadPostprocessError, match="no outputs for 1 of 1 features"):
        sp.postprocess_v1([example], [feature], {2: {}})
    with pytest.raises(sp.SquadPostprocessError, match="no start_logits / start_log_prob"):
        sp.postprocess_v1([example], [feature], {1: {"end_logits": np.zeros(SEQ_LEN)}})
    with pytest.raises(sp.SquadPostprocessError, match="different conversions"):
        sp.postprocess_v1([_example("other")], [feature], {1: {}})
    with pytest.raises(sp.SquadPostprocessError, match="start_n_top"):
        sp.postprocess_v2([example], [feature], {1: {
            "start_top_log_probs": np.zeros(2), "start_top_index": np.array([3, 4]),
            "end_top_log_probs": np.zeros(3), "end_top_index": np.array([3, 4, 5]),
            "cls_logits": np.float32(0)}})
    with pytest.raises(ValueError, match="must be positive"):
        sp.postprocess_v1([example], [feature], {}, n_best_size=0)


def _v2_outputs(start_index, start_lp, end_index, end_lp, cls):
    return {"start_top_log_probs": np.array(start_lp, np.float32),
            "start_top_index": np.array(start_index, np.int32),
            "end_top_log_probs": np.array(end_lp, np.float32),
            "end_top_index": np.array(end_index, np.int32),
            "cls_logits": np.float32(cls)}


def test_v2_beams_pair_each_start_with_its_own_ends():
    # start beams: word 1 (-0.1), word 2 (-2.0); end beams [start_n_top, end_n_top]:
    # for word 1: words 3, 2; for word 2: words 4, 1 (before the start: dropped).
    outputs = {1: _v2_outputs([4, 5], [-0.1, -2.0], [[6, 5], [7, 4]],
                              [[-0.2, -1.0], [-0.3, -5.0]], cls=-3.0)}
    result = sp.postprocess_v2([_example()], [_feature(1)], outputs)
    entries = result.nbest["q"]
    assert [e["text"] for e in entries] == [_text(1, 3), _text(1, 2), _text(2, 4)]
    assert [e["start_log_prob"] + e["end_log_prob"] for e in entries] == pytest.approx(
        [-0.3, -1.1, -2.3])
    assert result.null_odds == {"q": -3.0}
    assert result.predictions == {"q": _text(1, 3)}  # no threshold: the best span


def test_v2_null_score_and_threshold():
    examples = [_example("q0"), _example("q1"), _example("q2")]
    features = [_feature(1, 0, "q0", span_index=0), _feature(2, 0, "q0", span_index=1),
                _feature(3, 1, "q1")]  # q2: no feature at all
    beams = ([3], [-0.5], [4], [-0.5])
    outputs = {1: _v2_outputs(*beams, cls=2.0), 2: _v2_outputs(*beams, cls=-1.0),
               3: _v2_outputs(*beams, cls=0.5)}
    result = sp.postprocess_v2(examples, features, outputs)
    # The null score is the smallest cls_logits over the windows; 1e6 without windows.
    assert result.null_odds == {"q0": -1.0, "q1": 0.5, "q2": 1e6}
    assert result.nbest["q2"] == [{"text": "", "probability": 1.0,
                                   "start_log_prob": -1e6, "end_log_prob": -1e6}]
    assert result.predictions == {"q0": "Alpha beta", "q1": "Alpha beta", "q2": ""}
    answered = sp.postprocess_v2(examples, features, outputs, null_score_diff_threshold=0.0)
    assert answered.predictions == {"q0": "Alpha beta", "q1": "", "q2": ""}
    # At a null score equal to the threshold the original answers "" ...
    at = sp.apply_null_threshold(result, 0.5)
    assert at.predictions["q1"] == ""
    # ... and the official reading of a threshold answers.
    assert sp.apply_null_threshold(result, 0.5, inclusive=True).predictions["q1"] == "Alpha beta"
    with pytest.raises(ValueError, match="no null scores"):
        sp.apply_null_threshold(sp.SquadPredictions({}, {}), 0.0)


def test_collect_results_from_batches():
    batches = [{"unique_ids": np.array([5, 6]), "start_logits": np.arange(6).reshape(2, 3),
                "end_logits": np.ones((2, 3))},
               {"unique_ids": np.array([7]), "start_logits": np.zeros((1, 3)),
                "end_logits": np.zeros((1, 3))}]
    results = sp.collect_results(batches)
    assert sorted(results) == [5, 6, 7]
    assert results[6]["start_logits"].tolist() == [3, 4, 5]
    with pytest.raises(sp.SquadPostprocessError, match="appears twice"):
        sp.collect_results(batches + batches[1:])
    with pytest.raises(sp.SquadPostprocessError, match="shape"):
        sp.collect_results([{"unique_ids": np.array([1, 2]), "x": np.zeros((3, 2))}])


# ------------------------------------------------------------ real features, fixtures
@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


def _gold_positions(tokenizer, path, max_seq_length, doc_stride):
    """(qas_id, window) -> gold start/end input positions, from training features."""
    examples = squad.read_squad_examples(path, is_training=True)
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, 64, is_training=True)
    return {(f.qas_id, f.doc_span_index): (f.start_position, f.end_position)
            for f in features if not f.is_impossible}


def _eval_features(tokenizer, path, tmp_dir, max_seq_length, doc_stride):
    built = squad.load_or_build_features(
        path, tokenizer, str(tmp_dir / f"{path.stem}-{max_seq_length}.tf_record"),
        is_training=False, max_seq_length=max_seq_length, doc_stride=doc_stride,
        keep_features=True)
    return built.examples, built.features


def _peaked_logits(rng, feature, gold):
    start, end = rng.normal(size=len(feature.input_ids)), rng.normal(size=len(feature.input_ids))
    if gold is not None:
        start[gold[0]] += 20.0
        end[gold[1]] += 20.0
    return start, end


def _log_softmax(logits, p_mask):
    masked = np.where(p_mask == 1, -1e30, logits)
    shifted = masked - masked.max()
    return shifted - np.log(np.exp(shifted).sum())


def _beams(start_logits, end_logits, p_mask, start_n_top=5, end_n_top=5):
    """ALBERT's v2 beam outputs from start/end logits (end logits not conditioned on the
    start here: each start beam gets the same end beams)."""
    start_lp = _log_softmax(start_logits, p_mask)
    end_lp = _log_softmax(end_logits, p_mask)
    starts = np.argsort(-start_lp, kind="stable")[:start_n_top]
    ends = np.argsort(-end_lp, kind="stable")[:end_n_top]
    return start_lp[starts], starts, np.tile(end_lp[ends], start_n_top), np.tile(
        ends, start_n_top)


def _gold_spans(examples, features, gold):
    """qas_id -> the text of its gold positions (as the pieces can give it back)."""
    texts = {}
    for f in features:
        if (f.qas_id, f.doc_span_index) in gold and f.qas_id not in texts:
            s, e = gold[f.qas_id, f.doc_span_index]
            texts[f.qas_id] = squad.span_text(f, examples[f.example_index].paragraph_text, s, e)
    return texts


def _files(directory):
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("max_seq_length, doc_stride", [(384, 128), (128, 32)])
def test_v1_gold_peaks_give_the_gold_answers(tokenizer, tmp_path, max_seq_length, doc_stride):
    examples, features = _eval_features(tokenizer, V1_EXCERPT, tmp_path, max_seq_length,
                                        doc_stride)
    gold = _gold_positions(tokenizer, V1_EXCERPT, max_seq_length, doc_stride)
    assert len(features) > len(examples)  # some questions have several windows
    rng = np.random.default_rng(0)
    outputs = {}
    for f in features:
        start, end = _peaked_logits(rng, f, gold.get((f.qas_id, f.doc_span_index)))
        outputs[f.unique_id] = {"start_logits": start, "end_logits": end}
    out = tmp_path / "out"
    result = sp.write_predictions_v1(examples, features, outputs, out)
    assert _files(out) == ["nbest_predictions.json", "predictions.json"]
    assert result.files == {"predictions.json": str(out / "predictions.json"),
                            "nbest_predictions.json": str(out / "nbest_predictions.json")}
    predictions = json.loads((out / "predictions.json").read_text())
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert predictions == result.predictions and nbest == result.nbest
    assert list(predictions) == [e.qas_id for e in examples]
    assert (out / "predictions.json").read_text() == json.dumps(predictions, indent=4) + "\n"
    for entries in nbest.values():
        assert 1 <= len(entries) <= 20
        assert len({e["text"] for e in entries}) == len(entries)
        scores = [e["start_log_prob"] + e["end_log_prob"] for e in entries]
        assert scores == sorted(scores, reverse=True)
    # Every question answers the text of its gold pieces ...
    spans = _gold_spans(examples, features, gold)
    assert predictions == spans
    # ... which is a gold answer, except where a piece holds more than the answer
    # ("gold" inside "golden"): EM 100 on the others, which are nearly all.
    recoverable = {e.qas_id: list(e.answers) for e in examples
                   if any(sm.normalize_answer(spans[e.qas_id]) == sm.normalize_answer(a)
                          for a in e.answers)}
    assert len(recoverable) >= 0.9 * len(examples)
    assert sm.evaluate_v1(recoverable, predictions) == {"exact_match": 100.0, "f1": 100.0}
    score = sm.evaluate_v1(V1_EXCERPT, predictions)
    assert score["exact_match"] == pytest.approx(100 * len(recoverable) / len(examples))


@pytest.mark.parametrize("max_seq_length, doc_stride", [(384, 128), (96, 24)])
def test_v2_gold_peaks_and_null_scores(tokenizer, tmp_path, max_seq_length, doc_stride):
    examples, features = _eval_features(tokenizer, V2_EXCERPT, tmp_path, max_seq_length,
                                        doc_stride)
    gold = _gold_positions(tokenizer, V2_EXCERPT, max_seq_length, doc_stride)
    impossible = {e.qas_id for e in examples if e.is_impossible}
    assert impossible and len(impossible) < len(examples)
    rng = np.random.default_rng(1)
    outputs, cls = {}, {}
    for f in features:
        window_gold = gold.get((f.qas_id, f.doc_span_index))
        start, end = _peaked_logits(rng, f, window_gold)
        # A strong null score where the window has no answer.
        cls[f.unique_id] = float(rng.uniform(4, 6) if window_gold is None
                                 else rng.uniform(-6, -4))
        outputs[f.unique_id] = dict(zip(sp.V2_OUTPUTS, (*_beams(start, end, f.p_mask),
                                                         np.float32(cls[f.unique_id]))))
    out = tmp_path / "out"
    result = sp.write_predictions_v2(examples, features, outputs, out,
                                     null_score_diff_threshold=0.0)
    assert _files(out) == ["nbest_predictions.json", "null_odds.json", "predictions.json"]
    predictions = json.loads((out / "predictions.json").read_text())
    null_odds = json.loads((out / "null_odds.json").read_text())
    assert predictions == result.predictions
    assert null_odds == pytest.approx(result.null_odds)
    for e in examples:
        expected_null = min(np.float32(cls[f.unique_id]) for f in features
                            if f.qas_id == e.qas_id)
        assert null_odds[e.qas_id] == pytest.approx(float(expected_null))
    spans = _gold_spans(examples, features, gold)
    assert {q: p for q, p in predictions.items() if q in impossible} == {
        q: "" for q in impossible}
    assert {q: p for q, p in predictions.items() if q not in impossible} == spans
    score = sm.evaluate_v2(V2_EXCERPT, predictions, null_odds)
    assert score["HasAns_exact"] == 100.0 and score["NoAns_exact"] == 100.0
    assert score["exact"] == score["f1"] == 100.0
    # Without a threshold the best span is given everywhere; the original's evaluation
    # then finds a threshold between the two kinds of null scores and gets 100 again.
    scores, final = sp.evaluate_v2_with_best_threshold(examples, features, outputs,
                                                       V2_EXCERPT, tmp_path / "best")
    assert scores["f1"] == scores["best_f1"] == 100.0
    assert scores["null_score_diff_threshold"] == pytest.approx(
        max(v for q, v in null_odds.items() if q not in impossible), abs=1e-6)
    assert final.predictions == predictions
    assert _files(tmp_path / "best") == _files(out)
