"""Crashes on cue, for the resume tests, and the comparison of what the runs left.

`kill_at(step)` makes the training loop SIGKILL its own process when it reaches `step`:
right after the checkpoint written at that step, or, at a step without a checkpoint,
before anything of it is saved (the work since the last checkpoint is lost, as in a
preemption). A real SIGKILL: no handler, no flush, no atexit.

    python tests/helpers/faults.py SCRIPT [--logical_cpus=N] [--kill_at=STEP] -- FLAGS...

runs `albert_tf.scripts.SCRIPT` (run_classifier, run_squad, run_pretraining, ...) with
FLAGS, on N logical CPU devices (for `--distribution_strategy=mirrored`), killed at STEP.
A worker of a multi_worker_mirrored cluster runs so too, with its TF_CONFIG in the
environment (`scripts.run_with_faults(..., env=...)`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

import numpy as np


def kill_at(step: int) -> None:
    """Patches `Trainer` (this process only) to SIGKILL the process at `step`."""
    from albert_tf.training.loop import Trainer

    report, save = Trainer._report, Trainer.save

    def killing_report(self, reached, *args, **kwargs):
        report(self, reached, *args, **kwargs)
        if reached == step and reached % self.save_checkpoints_steps and \
                reached < self.train_steps:
            os.kill(os.getpid(), signal.SIGKILL)

    def killing_save(self):
        path = save(self)
        if self.step == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return path

    Trainer._report, Trainer.save = killing_report, killing_save


def use_logical_cpus(count: int) -> None:
    """Splits the CPU into `count` logical devices (before TensorFlow starts), so that
    MirroredStrategy has `count` replicas."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def checkpoint_values(path: str) -> dict[str, np.ndarray]:
    """Every variable a checkpoint holds (model weights, optimizer slots and step), by
    name; left out: the save counter (it counts the saves of one process) and the
    object graph."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith(("save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"))}


def assert_same_checkpoints(a: str, b: str) -> int:
    """The checkpoints at `a` and `b` hold the same variables with the same values, bit
    for bit; returns how many variables were compared."""
    left, right = checkpoint_values(a), checkpoint_values(b)
    assert left.keys() == right.keys(), sorted(set(left) ^ set(right))
    different = [name for name in left if not np.array_equal(left[name], right[name])]
    assert not different, (
        f"{len(different)} of {len(left)} variables differ, e.g. " + ", ".join(
            f"{n}: max |diff| {np.max(np.abs(left[n].astype(np.float64) - right[n])):.3g}"
            for n in different[:5]))
    return len(left)


def main() -> None:
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser()
    parser.add_argument("script")
    parser.add_argument("--logical_cpus", type=int, default=1)
    parser.add_argument("--kill_at", type=int, default=None)
    options = parser.parse_args(args[:split])
    if options.logical_cpus > 1:
        use_logical_cpus(options.logical_cpus)
    if options.kill_at is not None:
        kill_at(options.kill_at)
    module = importlib.import_module(f"albert_tf.scripts.{options.script}")
    sys.argv = [options.script, *args[split + 1:]]
    module.run()


if __name__ == "__main__":
    main()
