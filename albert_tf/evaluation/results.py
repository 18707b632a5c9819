"""Results files: `key = value` lines, as the original's eval_results.txt, which the
runs (`albert_tf.apps.session`) and the tasks (their test results) write alike."""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from albert_tf import fileio


def write_results(path: str, results: dict, title: str = "Eval results",
                  summary_step: int | None = None) -> None:
    """`key = value` lines, as the original's eval_results.txt; also logged, and with
    `summary_step` written as TensorBoard scalars under `<dir>/eval`."""
    logging.info("***** %s *****", title)
    for key, value in sorted(results.items()):
        logging.info("  %s = %s", key, value)
    fileio.write_text_atomically(path, "".join(f"{k} = {v}\n" for k, v in sorted(results.items())))
    if summary_step is not None:
        writer = tf.summary.create_file_writer(os.path.join(os.path.dirname(path), "eval"))
        with writer.as_default(step=summary_step):
            for key, value in results.items():
                if key != "global_step":
                    tf.summary.scalar(key, float(value))
        writer.flush()
