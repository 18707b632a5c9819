"""What wraps a fine-tuning run's stages without being one of them: distillation
(`albert_tf.apps.distill.Distillation`) and LoRA (`LoRA`). The driver's stages
(`albert_tf.apps.driver.run`) call each extension of the run at four points, in order,
and take what it returns in place of what the stage made:

    started(run, model)                   the model built and loaded, before any write
    train_records(run, records) -> (path, extra parsing spec) or None (unchanged)
    objective(run, objective) -> objective
    trained(run, model)                   after the last training step

An extension is made for a run by its `for_run(run)` (None: the run does not use it),
which checks the extension's options before any work.
"""

from __future__ import annotations


class Extension:
    """Base of the run's extensions: every hook leaves what the stage made as it is."""

    @classmethod
    def for_run(cls, run) -> Extension | None:
        raise NotImplementedError(f"{cls.__name__}.for_run")

    def started(self, run, model) -> None:
        """The model is built and started from its weights (inside the stage that
        removes an output directory the run made, if it stops)."""

    def train_records(self, run, records) -> tuple[str, dict] | None:
        """(the path of the records to train on, features to parse beside the task's)
        in place of the training split's cached records (`albert_tf.data.cache.
        CachedRecords`); None: those."""
        return None

    def objective(self, run, objective):
        """What training minimizes, from the task's objective."""
        return objective

    def trained(self, run, model) -> None:
        """The last training step is taken; evaluation and export follow."""


class LoRA(Extension):
    """--lora_rank: adapters on the loaded base (its fingerprint is the adapter's), the
    rest frozen; --lora_ffn: on the FFN's denses too."""

    def __init__(self, rank: int, ffn: bool):
        self.rank, self.ffn = rank, ffn

    @classmethod
    def for_run(cls, run) -> LoRA | None:
        options = run.options
        return cls(options.lora_rank, options.lora_ffn) if options.lora_rank else None

    def started(self, run, model) -> None:
        with run.strategy.scope():
            model.enable_lora(self.rank, ffn=self.ffn)
