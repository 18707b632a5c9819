"""The official SQuAD v1.1 and v2.0 scores, computed here (no external script needed).

Answers are compared after normalization: lower case, punctuation (`string.punctuation`)
removed, the articles "a", "an", "the" removed as whole words, whitespace collapsed.
Exact match is equality of the normalized texts; F1 is the token-level F1 of the
normalized texts' whitespace tokens (bag of tokens). Each question scores the maximum over
its gold answers, and the totals are percentages.

v1.1 (`evaluate_v1`): `exact_match` and `f1`. A question without a prediction scores 0.
An empty prediction or gold answer has F1 0 (the v1.1 script's rule).

v2.0 (`evaluate_v2`): a question without gold answers (unanswerable) is right only with
an empty prediction; gold answers that normalize to nothing are ignored. F1 is 1 when
both sides are empty and 0 when only one is. With `na_probs` (the `null_odds.json`
values: the higher, the more likely "no answer"), a question whose value is above
`na_prob_thresh` counts as answered "no answer", and the best thresholds are searched as
the official v2.0 script does: `best_exact` / `best_f1` are the scores with the threshold
that maximizes them, `best_exact_thresh` / `best_f1_thresh` those thresholds. Keys:
`exact`, `f1`, `total`, `HasAns_exact`, `HasAns_f1`, `HasAns_total`, `NoAns_exact`,
`NoAns_f1`, `NoAns_total` (each group only when it has questions), then the `best_*` keys
(only with `na_probs`).

Gold answers come from a SQuAD JSON file (path, document or its `data` list), a list of
`SquadExample`, or a mapping question id -> answer texts (`gold_answers`). Unlike the
official v2.0 script, which stops on a missing prediction, a question without a
prediction counts as wrong under every threshold (and is logged).
"""

from __future__ import annotations

import collections
import json
import os
import re
import string
from typing import Mapping

from absl import logging

from albert_tf import fileio
from albert_tf.data.squad import SquadExample

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# --------------------------------------------------------------------- normalization
def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def exact_match_score(prediction: str, gold: str) -> int:
    """1 when the normalized texts are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def _token_f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str) -> float:
    """v1.1 token F1 (0 when either side has no token)."""
    return _token_f1(answer_tokens(prediction), answer_tokens(gold))


def f1_score_v2(prediction: str, gold: str) -> float:
    """v2.0 token F1: as v1.1, except that two empty answers agree (1)."""
    predicted, gold_tokens = answer_tokens(prediction), answer_tokens(gold)
    if not predicted or not gold_tokens:
        return float(predicted == gold_tokens)
    return _token_f1(predicted, gold_tokens)


# ------------------------------------------------------------------------ gold answers
def gold_answers(source) -> dict[str, list[str]]:
    """Question id -> gold answer texts (empty for unanswerable questions).

    source: a SQuAD JSON file path, its parsed document (with `data`) or `data` list, a
      sequence of `SquadExample` (their `answers`), or such a mapping already.
    """
    if isinstance(source, (str, os.PathLike)):
        source = json.loads(fileio.read_bytes(source))
    if isinstance(source, Mapping) and isinstance(source.get("data"), list) and all(
            isinstance(article, Mapping) for article in source["data"]):
        source = source["data"]  # a SQuAD document
    if isinstance(source, Mapping):
        return {str(qid): [str(a) for a in answers] for qid, answers in source.items()}
    source = list(source)
    if all(isinstance(item, SquadExample) for item in source):
        return {e.qas_id: list(e.answers) for e in source}
    gold = {}
    for article in source:
        try:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    gold[str(qa["id"])] = [a["text"] for a in qa.get("answers", [])]
        except (KeyError, TypeError) as e:
            raise ValueError(f"not SQuAD data: an article lacks {e}") from None
    return gold


def _check_predictions(predictions: Mapping[str, str], gold: Mapping) -> list[str]:
    missing = [qid for qid in gold if qid not in predictions]
    if missing:
        logging.warning("%d of %d questions have no prediction and score 0 (first: %s)",
                        len(missing), len(gold), missing[0])
    return missing


def _percent(values, count: int) -> float:
    return 100.0 * sum(values) / count


# ------------------------------------------------------------------------------- v1.1
def evaluate_v1(gold, predictions: Mapping[str, str]) -> dict[str, float]:
    """SQuAD v1.1: {"exact_match": %, "f1": %}, the maximum over each question's gold
    answers, over every question of `gold` (see `gold_answers`)."""
    gold = gold_answers(gold)
    if not gold:
        raise ValueError("no gold questions to score")
    _check_predictions(predictions, gold)
    exact, f1 = [], []
    for qid, answers in gold.items():
        if qid not in predictions or not answers:
            exact.append(0)
            f1.append(0.0)
            continue
        prediction = predictions[qid]
        exact.append(max(exact_match_score(prediction, a) for a in answers))
        f1.append(max(f1_score(prediction, a) for a in answers))
    return {"exact_match": _percent(exact, len(gold)), "f1": _percent(f1, len(gold))}


# ------------------------------------------------------------------------------- v2.0
def raw_scores_v2(gold, predictions: Mapping[str, str]
                  ) -> tuple[dict[str, int], dict[str, float]]:
    """Per-question exact match and F1 (v2.0 rules) of the questions with a prediction."""
    gold = gold_answers(gold)
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        if qid not in predictions:
            continue
        answers = [a for a in answers if normalize_answer(a)] or [""]
        prediction = predictions[qid]
        exact[qid] = max(exact_match_score(prediction, a) for a in answers)
        f1[qid] = max(f1_score_v2(prediction, a) for a in answers)
    return exact, f1


def apply_no_answer_threshold(scores: Mapping[str, float], na_probs: Mapping[str, float],
                              has_answer: Mapping[str, bool], threshold: float
                              ) -> dict[str, float]:
    """Scores with "no answer" predicted where `na_probs` is above `threshold`."""
    return {qid: (float(not has_answer[qid]) if na_probs[qid] > threshold else score)
            for qid, score in scores.items()}


def best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float],
                   na_probs: Mapping[str, float], has_answer: Mapping[str, bool]
                   ) -> tuple[float, float]:
    """(best score %, its threshold) over thresholds on `na_probs`, as the official
    v2.0 script: from "every question answered 'no answer'", questions switch to their
    prediction in increasing `na_probs` order (ties in `na_probs`' order), and the first
    best running score gives the threshold (0.0 when none beats the start). Questions
    in `has_answer` without a score count 0 under every threshold."""
    total = len(has_answer)
    current = sum(1 for qid, has in has_answer.items() if not has and qid in scores)
    best, threshold = current, 0.0
    order = sorted((qid for qid in na_probs if qid in scores), key=lambda q: na_probs[q])
    for qid in order:
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, threshold = current, float(na_probs[qid])
    return 100.0 * best / total, threshold


def evaluate_v2(gold, predictions: Mapping[str, str],
                na_probs: Mapping[str, float] | None = None,
                na_prob_thresh: float = 1.0) -> dict[str, float]:
    """SQuAD v2.0 scores (keys in the module docstring), as the official script with
    `--na-prob-file` when `na_probs` is given (its default `--na-prob-thresh` 1.0)."""
    gold = gold_answers(gold)
    if not gold:
        raise ValueError("no gold questions to score")
    missing = _check_predictions(predictions, gold)
    has_answer = {qid: bool(answers) for qid, answers in gold.items()}
    exact_raw, f1_raw = raw_scores_v2(gold, predictions)
    if na_probs is not None:
        absent = [qid for qid in exact_raw if qid not in na_probs]
        if absent:
            raise ValueError(f"na_probs has no value for {len(absent)} predicted "
                             f"question(s) (first: {absent[0]})")
        exact = apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
        f1 = apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    else:
        exact, f1 = dict(exact_raw), dict(f1_raw)
    for qid in missing:
        exact[qid], f1[qid] = 0, 0.0

    def summary(qids, prefix=""):
        return {f"{prefix}exact": _percent((exact[q] for q in qids), len(qids)),
                f"{prefix}f1": _percent((f1[q] for q in qids), len(qids)),
                f"{prefix}total": len(qids)}

    result = summary(list(gold))
    has = [q for q in gold if has_answer[q]]
    has_not = [q for q in gold if not has_answer[q]]
    if has:
        result.update(summary(has, "HasAns_"))
    if has_not:
        result.update(summary(has_not, "NoAns_"))
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = best_threshold(
            predictions, exact_raw, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = best_threshold(
            predictions, f1_raw, na_probs, has_answer)
    return result
