"""`run_squad.py`: SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original
run_squad_v1.py / run_squad_v2.py; predictions, n-best, null odds and the official
EM / F1.

The flags are the options of the task (`albert_tf.tasks.squad`), made flags here; the
run is the one fine-tuning driver's (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf.apps import driver
from albert_tf.tasks.squad import SquadTask


def define_flags():
    # As the original: no dev split (no --eval_batch_size), epochs not steps.
    driver.define_task_flags([SquadTask], "SQuAD",
                             omit=("eval_batch_size", "train_step", "warmup_step"))


def options_from_flags():
    """The run's options, from the parsed flags."""
    return driver.options_from_flags(default=SquadTask)


def run(options) -> dict:
    """Trains and/or predicts; returns the official scores of the predictions when the
    predict file has answers. `options`: a mapping of run_squad.py's flags, or
    `SquadTask.Options`."""
    return driver.run(driver.task_of(options, default=SquadTask), options)
