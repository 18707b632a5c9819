"""SQuAD post-processing: per-feature model outputs -> answer texts, as ALBERT's
`run_squad_v1.py` and `run_squad_v2.py` produce them.

Inputs: the examples and features of `albert_tf.data.squad` (e.g.
`load_or_build_features(..., keep_features=True)`) and a mapping unique_id -> that
feature's outputs (numpy arrays, as a dict or an object with those attributes;
`collect_results` builds it from batches):

- v1.1: `start_logits` and `end_logits` [seq_len] (the original's prediction names
  `start_log_prob` / `end_log_prob`, which hold logits there too, are accepted).
- v2.0: the beam outputs of ALBERT's v2 head: `start_top_log_probs`, `start_top_index`
  [start_n_top], `end_top_log_probs`, `end_top_index` [start_n_top * end_n_top] (end
  beam j of start beam i at i * end_n_top + j; [start_n_top, end_n_top] is accepted),
  and `cls_logits` (a scalar: the higher, the more likely "no answer").

For each example, candidate spans come from every feature (window) of the example:
v1.1 pairs the `n_best_size` best starts with the `n_best_size` best ends among the
feature's real positions (its `input_mask`; the original also ranks the padding
positions of its max_seq_length features, whose logits would here depend on how far
a batch was padded, and which it then discards); v2.0 takes the model's beams (which
never point at padding: p_mask). A candidate is kept when both ends lie in the window's paragraph
pieces, the window is the start piece's max-context window, end >= start and it spans
at most `max_answer_length` pieces. Candidates are ranked by start score + end score
(ties keep their order of appearance), each text is kept once (the text is the
paragraph's characters from the start piece's first to the end piece's last character,
stripped: `albert_tf.data.squad.span_text`), and the first `n_best_size` form the
n-best list, with softmax probabilities over it. When nothing is left the original's
placeholder is used: "empty" with scores 0 (v1.1), "" with scores -1e6 (v2.0).

v1.1 answers the best text. v2.0 gives each question the null score
`min(cls_logits)` over its windows (`null_odds.json`), and answers the best text when
`null_score_diff_threshold` is None or the null score is below it, else "" (no answer).
`evaluate_v2_with_best_threshold` runs the original's v2.0 evaluation: scores without a
threshold, takes the threshold that maximizes F1 (`best_f1_thresh`), answers with it
(answering at the threshold too, where the original does not: see there).

`postprocess_serve_text` does the same for the outputs of a SQuAD SavedModel's
`serve_text` signature (one window per question, located in the raw context by the
export's `token_start_char` / `token_end_char`).

Files (JSON with indent 4 and a final newline, as the original, each written under a
temporary name and renamed): `predictions.json` (id -> text), `nbest_predictions.json`
(id -> [{text, probability, start_log_prob, end_log_prob}]), `null_odds.json` (v2.0:
id -> null score).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, names
from albert_tf.data.squad import SquadExample, SquadFeature, span_text
from albert_tf.evaluation import squad_metrics

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"

DEFAULT_N_BEST_SIZE = 20
DEFAULT_MAX_ANSWER_LENGTH = 30

# Each v1.1 output under our name, then the original's prediction name.
V1_OUTPUTS = {"start": (names.START_LOGITS, "start_log_prob"),
              "end": (names.END_LOGITS, "end_log_prob")}
V2_OUTPUTS = names.SQUAD_V2_OUTPUTS

# The original's placeholders when no candidate is left, and its initial null score.
V1_EMPTY = ("empty", 0.0)
V2_EMPTY = ("", -1e6)
NO_FEATURE_NULL_SCORE = 1e6


class SquadPostprocessError(ValueError):
    """Outputs that do not fit the features: missing, malformed or of the wrong kind."""


@dataclasses.dataclass
class SquadPredictions:
    """predictions: qas_id -> answer text; nbest: qas_id -> n-best entries; null_odds
    (v2.0): qas_id -> null score; files: what `write` wrote, name -> path."""

    predictions: dict[str, str]
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float] | None = None
    files: dict[str, str] = dataclasses.field(default_factory=dict)

    def write(self, output_dir) -> dict[str, str]:
        """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json
        into `output_dir` (created if needed); returns name -> path."""
        output_dir = os.fspath(output_dir)
        tf.io.gfile.makedirs(output_dir)
        contents = {PREDICTIONS_FILE: self.predictions, NBEST_FILE: self.nbest}
        if self.null_odds is not None:
            contents[NULL_ODDS_FILE] = self.null_odds
        for name, content in contents.items():
            path = os.path.join(output_dir, name)
            fileio.write_text_atomically(path, json.dumps(content, indent=4) + "\n")
            self.files[name] = path
        return dict(self.files)


# -------------------------------------------------------------------------- helpers
def best_indexes(scores, n_best_size: int) -> list[int]:
    """Positions of the `n_best_size` largest scores, best first (ties: lower first)."""
    scores = np.asarray(scores)
    return np.argsort(-scores, kind="stable")[:n_best_size].tolist()


def softmax(scores: Sequence[float]) -> list[float]:
    """Softmax of a list of scores (empty -> empty), as Python floats."""
    if not len(scores):
        return []
    values = np.asarray(scores, np.float64)
    exponents = np.exp(values - values.max())
    return (exponents / exponents.sum()).tolist()


def _get(result: Any, name: str):
    if isinstance(result, Mapping):
        return result.get(name)
    return getattr(result, name, None)


def _output(result: Any, names: Sequence[str], unique_id: int) -> np.ndarray:
    for name in names:
        value = _get(result, name)
        if value is not None:
            return np.asarray(value)
    raise SquadPostprocessError(
        f"the outputs of feature {unique_id} have no {' / '.join(names)}")


def collect_results(batches: Iterable[Mapping[str, Any]], unique_id_key: str = names.UNIQUE_IDS
                    ) -> dict[int, dict[str, np.ndarray]]:
    """unique_id -> that feature's outputs, from batches of outputs ([B, ...] arrays,
    tensors or lists) that hold the batch's unique ids under `unique_id_key`."""
    results: dict[int, dict[str, np.ndarray]] = {}
    for batch in batches:
        if unique_id_key not in batch:
            raise SquadPostprocessError(f"a batch of outputs has no {unique_id_key!r}")
        ids = np.asarray(batch[unique_id_key]).reshape(-1)
        arrays = {name: np.asarray(value) for name, value in batch.items()
                  if name != unique_id_key}
        for name, value in arrays.items():
            if value.ndim == 0 or value.shape[0] != len(ids):
                raise SquadPostprocessError(
                    f"output {name!r} has shape {value.shape} for a batch of {len(ids)}")
        for row, unique_id in enumerate(ids.tolist()):
            if unique_id in results:
                raise SquadPostprocessError(f"feature {unique_id} appears twice in the "
                                            "outputs")
            results[unique_id] = {name: value[row] for name, value in arrays.items()}
    return results


def _features_by_example(examples: Sequence[SquadExample],
                         features: Sequence[SquadFeature],
                         results: Mapping[int, Any]) -> list[list[SquadFeature]]:
    by_example: list[list[SquadFeature]] = [[] for _ in examples]
    missing = []
    for feature in features:
        if not 0 <= feature.example_index < len(examples):
            raise SquadPostprocessError(
                f"feature {feature.unique_id} belongs to example {feature.example_index}, "
                f"but there are {len(examples)} examples")
        if examples[feature.example_index].qas_id != feature.qas_id:
            raise SquadPostprocessError(
                f"feature {feature.unique_id} is of question {feature.qas_id!r}, but "
                f"example {feature.example_index} is {examples[feature.example_index].qas_id!r}"
                ": features and examples come from different conversions")
        if feature.unique_id not in results:
            missing.append(feature.unique_id)
        by_example[feature.example_index].append(feature)
    if missing:
        raise SquadPostprocessError(
            f"no outputs for {len(missing)} of {len(features)} features (first unique_id "
            f"{missing[0]}): predict every feature (no drop_remainder)")
    unused = len(results) - (len(features) - len(missing))
    if unused > 0:
        logging.warning("%d outputs belong to no given feature and are ignored", unused)
    without = sum(1 for group in by_example if not group)
    if without:
        logging.warning("%d of %d questions have no feature (paragraph not aligned): "
                        "they get the placeholder answer", without, len(examples))
    return by_example


@dataclasses.dataclass
class _Candidate:
    feature: SquadFeature
    start: int          # input positions
    end: int
    start_score: float
    end_score: float

    @property
    def score(self) -> float:
        return self.start_score + self.end_score


def _keep(feature: SquadFeature, start: int, end: int, max_answer_length: int) -> bool:
    return (feature.in_window(start) and feature.in_window(end)
            and feature.is_max_context(start) and start <= end
            and end - start + 1 <= max_answer_length)


def _merge(feature: SquadFeature, scored: Iterable[tuple[int, int, float, float]]
           ) -> list[_Candidate]:
    """One candidate per (start, end) of a feature, scores averaged over repeats (as the
    original accumulates them), in order of first appearance."""
    spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for start, end, start_score, end_score in scored:
        spans.setdefault((start, end), []).append((start_score, end_score))
    return [_Candidate(feature, start, end,
                       sum(s for s, _ in values) / len(values),
                       sum(e for _, e in values) / len(values))
            for (start, end), values in spans.items()]


def _v1_candidates(feature: SquadFeature, result: Any, n_best_size: int,
                   max_answer_length: int) -> list[_Candidate]:
    # Only the feature's real positions: the logits past them depend on how far its
    # batch was padded (the original pads every feature to max_seq_length).
    length = int(np.sum(feature.input_mask))
    start_logits = _output(result, V1_OUTPUTS["start"], feature.unique_id).reshape(-1)
    end_logits = _output(result, V1_OUTPUTS["end"], feature.unique_id).reshape(-1)
    start_logits, end_logits = start_logits[:length], end_logits[:length]
    starts = best_indexes(start_logits, n_best_size)
    ends = best_indexes(end_logits, n_best_size)
    return _merge(feature, (
        (s, e, float(start_logits[s]), float(end_logits[e]))
        for s in starts for e in ends if _keep(feature, s, e, max_answer_length)))


def _v2_beams(feature: SquadFeature, result: Any) -> tuple[np.ndarray, ...]:
    start_lp, start_index, end_lp, end_index, cls_logits = (
        _output(result, (name,), feature.unique_id) for name in V2_OUTPUTS)
    start_lp, start_index = start_lp.reshape(-1), start_index.reshape(-1)
    end_lp, end_index = end_lp.reshape(-1), end_index.reshape(-1)
    start_n_top = len(start_index)
    if (start_n_top == 0 or len(start_lp) != start_n_top or len(end_lp) != len(end_index)
            or len(end_index) % start_n_top):
        raise SquadPostprocessError(
            f"feature {feature.unique_id}: beam outputs of inconsistent sizes (start "
            f"{len(start_lp)}/{start_n_top}, end {len(end_lp)}/{len(end_index)}; the end "
            "beams must be start_n_top * end_n_top)")
    if cls_logits.size != 1:
        raise SquadPostprocessError(
            f"feature {feature.unique_id}: cls_logits must be one value, got shape "
            f"{cls_logits.shape}")
    return start_lp, start_index, end_lp, end_index, float(cls_logits.reshape(-1)[0])


def _v2_candidates(feature: SquadFeature, beams, max_answer_length: int
                   ) -> list[_Candidate]:
    start_lp, start_index, end_lp, end_index, _ = beams
    end_n_top = len(end_index) // len(start_index)
    scored = []
    for i, start in enumerate(start_index.tolist()):
        for k in range(i * end_n_top, (i + 1) * end_n_top):
            end = int(end_index[k])
            if _keep(feature, start, end, max_answer_length):
                scored.append((start, end, float(start_lp[i]), float(end_lp[k])))
    return _merge(feature, scored)


def _nbest(example: SquadExample, candidates: list[_Candidate], n_best_size: int,
           empty: tuple[str, float]) -> list[dict]:
    ranked = sorted(candidates, key=lambda c: c.score, reverse=True)  # stable
    seen: set[str] = set()
    kept: list[tuple[str, float, float]] = []
    for candidate in ranked:
        if len(kept) >= n_best_size:
            break
        text = span_text(candidate.feature, example.paragraph_text, candidate.start,
                         candidate.end)
        if text in seen:
            continue
        seen.add(text)
        kept.append((text, candidate.start_score, candidate.end_score))
    if not kept:
        kept.append((empty[0], empty[1], empty[1]))
    probabilities = softmax([s + e for _, s, e in kept])
    return [{"text": text, "probability": p, "start_log_prob": s, "end_log_prob": e}
            for (text, s, e), p in zip(kept, probabilities)]


def _check_sizes(n_best_size: int, max_answer_length: int) -> None:
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(f"n_best_size ({n_best_size}) and max_answer_length "
                         f"({max_answer_length}) must be positive")


# ------------------------------------------------------------------------------- v1.1
def postprocess_v1(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                   results: Mapping[int, Any], *, n_best_size: int = DEFAULT_N_BEST_SIZE,
                   max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH) -> SquadPredictions:
    """v1.1 answers and n-best lists from start/end logits (see the module docstring)."""
    _check_sizes(n_best_size, max_answer_length)
    by_example = _features_by_example(examples, features, results)
    predictions, nbest = {}, {}
    for example, group in zip(examples, by_example):
        candidates = [c for feature in group for c in _v1_candidates(
            feature, results[feature.unique_id], n_best_size, max_answer_length)]
        entries = _nbest(example, candidates, n_best_size, V1_EMPTY)
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
    return SquadPredictions(predictions, nbest)


def write_predictions_v1(examples, features, results, output_dir, *,
                         n_best_size: int = DEFAULT_N_BEST_SIZE,
                         max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH
                         ) -> SquadPredictions:
    """`postprocess_v1`, written to predictions.json and nbest_predictions.json."""
    result = postprocess_v1(examples, features, results, n_best_size=n_best_size,
                            max_answer_length=max_answer_length)
    result.write(output_dir)
    return result


# ------------------------------------------------------------------------------- v2.0
def apply_null_threshold(predictions: SquadPredictions,
                         null_score_diff_threshold: float | None, *,
                         inclusive: bool = False) -> SquadPredictions:
    """The answers with `null_score_diff_threshold`: the best n-best text where the null
    score is below the threshold (or the threshold is None), else "" (no answer).
    `inclusive`: answer at a null score equal to the threshold too (the official v2.0
    script's reading of its thresholds); the original ALBERT writer does not."""
    if predictions.null_odds is None:
        raise ValueError("these predictions have no null scores (v1.1)")
    answers = {}
    for qas_id, entries in predictions.nbest.items():
        null_score = predictions.null_odds[qas_id]
        answer = (null_score_diff_threshold is None
                  or null_score < null_score_diff_threshold
                  or (inclusive and null_score == null_score_diff_threshold))
        answers[qas_id] = entries[0]["text"] if answer else ""
    return SquadPredictions(answers, predictions.nbest, predictions.null_odds)


def postprocess_v2(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                   results: Mapping[int, Any], *, n_best_size: int = DEFAULT_N_BEST_SIZE,
                   max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
                   null_score_diff_threshold: float | None = None) -> SquadPredictions:
    """v2.0 answers, n-best lists and null scores from ALBERT's beam outputs (see the
    module docstring)."""
    _check_sizes(n_best_size, max_answer_length)
    by_example = _features_by_example(examples, features, results)
    nbest, null_odds = {}, {}
    for example, group in zip(examples, by_example):
        null_score = NO_FEATURE_NULL_SCORE
        candidates = []
        for feature in group:
            beams = _v2_beams(feature, results[feature.unique_id])
            null_score = min(null_score, beams[-1])
            candidates.extend(_v2_candidates(feature, beams, max_answer_length))
        nbest[example.qas_id] = _nbest(example, candidates, n_best_size, V2_EMPTY)
        null_odds[example.qas_id] = null_score
    return apply_null_threshold(SquadPredictions({}, nbest, null_odds),
                                null_score_diff_threshold)


def write_predictions_v2(examples, features, results, output_dir, *,
                         n_best_size: int = DEFAULT_N_BEST_SIZE,
                         max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
                         null_score_diff_threshold: float | None = None) -> SquadPredictions:
    """`postprocess_v2`, written to predictions.json, nbest_predictions.json and
    null_odds.json."""
    result = postprocess_v2(examples, features, results, n_best_size=n_best_size,
                            max_answer_length=max_answer_length,
                            null_score_diff_threshold=null_score_diff_threshold)
    result.write(output_dir)
    return result


def evaluate_v2_with_best_threshold(examples, features, results, gold=None,
                                    output_dir=None, *,
                                    n_best_size: int = DEFAULT_N_BEST_SIZE,
                                    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
                                    na_prob_thresh: float = 1.0
                                    ) -> tuple[dict[str, float], SquadPredictions]:
    """The original run_squad_v2.py evaluation: answers without a threshold, the official
    v2.0 scores with the null scores as `na_probs`, then answers again with
    `null_score_diff_threshold` = `best_f1_thresh`, and scores those.

    One difference: the official script's best threshold means "no answer above it", so
    the question(s) whose null score equals `best_f1_thresh` are answered here; the
    original answers only below it, which turns the question that set the threshold
    (and any tied with it) into "no answer" and scores a little under `best_f1`.

    gold: see `squad_metrics.gold_answers` (default: the examples' answers). Returns the
    official v2.0 scores of the final answers plus `null_score_diff_threshold`, and the
    final predictions (written to `output_dir` when given).
    """
    gold = squad_metrics.gold_answers(examples if gold is None else gold)
    first = postprocess_v2(examples, features, results, n_best_size=n_best_size,
                           max_answer_length=max_answer_length)
    scores = squad_metrics.evaluate_v2(gold, first.predictions, first.null_odds,
                                       na_prob_thresh)
    threshold = scores["best_f1_thresh"]
    final = apply_null_threshold(first, threshold, inclusive=True)
    if output_dir is not None:
        final.write(output_dir)
    scores = squad_metrics.evaluate_v2(gold, final.predictions, final.null_odds,
                                       na_prob_thresh)
    scores["null_score_diff_threshold"] = threshold
    return scores, final


# ------------------------------------------------------------------ serving outputs
SERVE_TEXT_OUTPUTS = (names.CONTEXT_START, names.TOKEN_START_CHAR, names.TOKEN_END_CHAR,
                      *names.MODEL_INPUTS, names.P_MASK)


def serve_text_features(questions: Sequence[str], contexts: Sequence[str],
                        outputs: Mapping[str, Any], qas_ids: Sequence[str] | None = None
                        ) -> tuple[list[SquadExample], list[SquadFeature], dict[int, dict]]:
    """Examples, features and results (for `postprocess_v1` / `postprocess_v2`) from the
    outputs of a SQuAD export's `serve_text` signature called on `questions` and
    `contexts`: one feature (window) per question, its pieces located in the context by
    `token_start_char` / `token_end_char`. `qas_ids` default to "0", "1", ..."""
    missing = [n for n in SERVE_TEXT_OUTPUTS if n not in outputs]
    if missing:
        raise SquadPostprocessError(
            f"the outputs have no {', '.join(missing)}: pass everything the serve_text "
            "signature of a SQuAD export returns")
    arrays = {name: np.asarray(value) for name, value in outputs.items()}
    batch = len(contexts)
    qas_ids = [str(i) for i in range(batch)] if qas_ids is None else list(qas_ids)
    if len(questions) != batch or len(qas_ids) != batch:
        raise SquadPostprocessError(
            f"{len(questions)} questions, {batch} contexts and {len(qas_ids)} ids: give "
            "one of each per question")
    for name, value in arrays.items():
        if value.shape[:1] != (batch,):
            raise SquadPostprocessError(
                f"output {name} has shape {value.shape}, expected {batch} rows (one per "
                "question)")
    examples, features, results = [], [], {}
    for i, (question, context, qas_id) in enumerate(zip(questions, contexts, qas_ids)):
        starts = arrays[names.TOKEN_START_CHAR][i]
        in_context = np.flatnonzero(starts >= 0)
        first = int(arrays[names.CONTEXT_START][i])
        if in_context.size and in_context[0] != first:
            raise SquadPostprocessError(
                f"row {i}: context pieces start at {in_context[0]}, context_start says "
                f"{first}: the outputs are not serve_text's")
        examples.append(SquadExample(qas_id=qas_id, question_text=question,
                                     paragraph_text=context))
        features.append(SquadFeature(
            unique_id=i, example_index=i, qas_id=qas_id, doc_span_index=0,
            doc_span_start=0, doc_offset=first,
            tok_start_to_orig_index=starts[in_context].tolist(),
            tok_end_to_orig_index=(arrays[names.TOKEN_END_CHAR][i][in_context] - 1).tolist(),
            token_is_max_context=[True] * in_context.size,
            input_ids=arrays[names.INPUT_WORD_IDS][i], input_mask=arrays[names.INPUT_MASK][i],
            segment_ids=arrays[names.INPUT_TYPE_IDS][i], p_mask=arrays[names.P_MASK][i]))
        results[i] = {name: value[i] for name, value in arrays.items()}
    return examples, features, results


def postprocess_serve_text(questions: Sequence[str], contexts: Sequence[str],
                           outputs: Mapping[str, Any], *, qas_ids=None,
                           n_best_size: int = DEFAULT_N_BEST_SIZE,
                           max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
                           null_score_diff_threshold: float | None = None
                           ) -> SquadPredictions:
    """Answers, n-best lists (and v2.0 null scores) from a SQuAD export's `serve_text`
    outputs, by the rules `run_squad.py` applies to its windows: for a context that
    fits in one window these are run_squad.py's predictions. v2.0 when the outputs have
    `cls_logits`."""
    examples, features, results = serve_text_features(questions, contexts, outputs,
                                                       qas_ids)
    if "cls_logits" in outputs:
        return postprocess_v2(examples, features, results, n_best_size=n_best_size,
                              max_answer_length=max_answer_length,
                              null_score_diff_threshold=null_score_diff_threshold)
    return postprocess_v1(examples, features, results, n_best_size=n_best_size,
                          max_answer_length=max_answer_length)


__all__ = [
    "DEFAULT_MAX_ANSWER_LENGTH", "DEFAULT_N_BEST_SIZE", "NBEST_FILE", "NULL_ODDS_FILE",
    "PREDICTIONS_FILE", "SquadPostprocessError", "SquadPredictions", "apply_null_threshold",
    "best_indexes", "collect_results", "evaluate_v2_with_best_threshold", "postprocess_v1",
    "postprocess_serve_text", "postprocess_v2", "serve_text_features", "softmax",
    "write_predictions_v1", "write_predictions_v2",
]
