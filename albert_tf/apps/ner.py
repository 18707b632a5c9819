"""`run_ner.py`: token classification (NER) on CoNLL column files or CLUENER JSON lines:
train / eval / predict, the labels kept beside the model, an export that answers raw
text.

The flags are the options of the task (`albert_tf.tasks.token_classification`), made
flags here; the run is the one fine-tuning driver's (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf.apps import driver
from albert_tf.tasks.token_classification import TokenClassificationTask


def define_flags():
    driver.define_task_flags([TokenClassificationTask], "NER")


def options_from_flags():
    """The run's options, from the parsed flags."""
    return driver.options_from_flags(default=TokenClassificationTask)


def run(options) -> dict:
    """Trains, evaluates every kept checkpoint on the dev file (keeping the best),
    predicts the test file; returns the best dev scores. `options`: a mapping of
    run_ner.py's flags, or `TokenClassificationTask.Options`."""
    return driver.run(driver.task_of(options, default=TokenClassificationTask), options)
