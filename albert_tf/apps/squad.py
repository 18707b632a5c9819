"""`run_squad.py`: SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original
run_squad_v1.py / run_squad_v2.py; predictions, n-best, null odds and the official
EM / F1.

The flags are defined here; the task is `albert_tf.tasks.squad`, run by the one
fine-tuning driver (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf.apps import driver
from albert_tf.apps.options import typed_options
from albert_tf.apps.script_flags import (
    MODEL_FLAG_NAMES,
    FlagNames,
    define_fine_tuning_flags,
    define_model_flags,
)
from albert_tf.tasks.squad import SquadTask


def define_flags():
    define_model_flags(learning_rate=5e-5, optimizer="adamw")
    define_fine_tuning_flags(max_seq_length=384, predict_help="Predict --predict_file.",
                             eval_batch=False, train_step=False)
    SquadTask.define_flags()
    driver.define_task_module_flag("SQuAD")


# The flags passed to `run`: the model flags, the task's and a --task_module's.
FLAG_NAMES = MODEL_FLAG_NAMES + FlagNames("albert_tf.tasks.squad") + \
    driver.TASK_MODULE_FLAG_NAMES


def run(options: dict) -> dict:
    """Trains and/or predicts; returns the official scores of the predictions when the
    predict file has answers."""
    options = typed_options(options, FLAG_NAMES)
    return driver.run(driver.task_of(options, default=SquadTask), options)
