"""Evaluation: GLUE metrics and submission files, SQuAD post-processing and scoring.

- `glue_metrics`: accuracy, F1, Matthews correlation, Pearson and Spearman computed with
  numpy, `task_metrics` giving each GLUE task's scores under the original
  `run_classifier.py` eval keys (`eval_accuracy`, `matthew_corr`, `pearson`, ...), and
  `write_glue_submission` for the GLUE server's test-set files (`MRPC.tsv`, ...).
- `squad_postprocess`: per-feature model outputs -> answers, as the original
  `run_squad_v1.py` / `run_squad_v2.py` do it (n-best spans, `max_answer_length`,
  max-context starts, v2 beam outputs and null scores), written to `predictions.json`,
  `nbest_predictions.json` and (v2) `null_odds.json`.
- `squad_metrics`: the official SQuAD v1.1 and v2.0 scores (exact match, token F1,
  has-answer / no-answer breakdown, best null thresholds).
- `results`: `write_results`, the `key = value` results files (eval_results.txt, ...)
  of the runs and the tasks.
"""
