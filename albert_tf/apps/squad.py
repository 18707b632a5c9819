"""`run_squad.py`: SQuAD v1.1 and (with --version_2_with_negative) v2.0, as the original
run_squad_v1.py / run_squad_v2.py; predictions, n-best, null odds and the official
EM / F1.

The flags are defined here; the task is `albert_tf.tasks.squad`, run by the one
fine-tuning driver (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf.apps import common, driver
from albert_tf.tasks.squad import SquadTask


def define_flags():
    common.define_model_flags(learning_rate=5e-5, optimizer="adamw")
    common.define_fine_tuning_flags(max_seq_length=384, predict_help="Predict --predict_file.",
                                    eval_batch=False, train_step=False)
    SquadTask.define_flags()


# The flags passed to `run`: the model flags and the task's.
FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames("albert_tf.tasks.squad")


def run(settings: dict) -> dict:
    """Trains and/or predicts; returns the official scores of the predictions when the
    predict file has answers."""
    return driver.run(SquadTask, common.typed_options(settings, FLAG_NAMES))
