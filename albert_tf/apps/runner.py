"""How an absl script runs: its `main` (`app_main`: the flags to the app's `run`),
started by `program` with its `--help` and required flags, and bad input reported as
one line, `error: <why>` (`user_errors`: the errors that mean bad input).

The scripts (`run_pretraining.py`, `run_classifier.py`, `run_squad.py`, `run_ner.py`)
only define flags (their tasks' options, `albert_tf.apps.options`) and call
`albert_tf.apps.<script>.run`; everything they do is reachable from Python, with no
flag: `run` takes a mapping of the options, or the task's `Options`.
"""

from __future__ import annotations

import os

from absl import flags

from albert_tf.errors import DISK_ADVICE, UserError, short_reason


def user_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad flags or input, or a batch that does not fit in memory
    (reported as one line, not a traceback):
    kinds of error, not one per task: every `albert_tf.errors.UserError` (`UsageError`,
    `OptionsError`, `TaskModuleError`, `CheckpointError`, `ConfigError`, `DataError`,
    `TokenizerError`, `ExportError`, `DistributionError`, `OutputDirLocked`; every
    task's data errors are `DataError`s), a missing file, `TrainingOutOfMemory`."""
    from albert_tf.training.loop import TrainingOutOfMemory

    return (UserError, FileNotFoundError, TrainingOutOfMemory)


# What a run interrupted before or after its training steps says (a run stopped within
# them says where: `TrainingStopped`).
INTERRUPTED = ("stopped (Ctrl-C): rerun the same command to resume; the steps trained "
               "and records converted are kept in --output_dir")


def run_script(run, options_from_flags) -> None:
    """The body of every script's `main`: the options from the flags
    (`options_from_flags()`) to `run`, bad input to one line, `error: <why>` on stderr,
    once (exit status 1); a run stopped by a signal, `stopped: <how to resume>`."""
    import tensorflow as tf

    from albert_tf.training.loop import TrainingStopped

    try:
        run(options_from_flags())
    except TrainingStopped as e:
        raise SystemExit(f"stopped: {e}") from None
    except user_errors() as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED) from None
    except (OSError, tf.errors.OpError) as e:
        described = io_failure(e)
        if described is None:
            raise
        raise SystemExit(f"error: {described}") from None


# What a file system refuses, by what its message says (TensorFlow's file system names
# the path in its message; Python's OSError carries it).
_IO_REFUSALS = ("No space left on device", "Disk quota exceeded", "Permission denied",
                "Read-only file system", "No such file or directory")


def io_failure(error: Exception) -> str | None:
    """One line for a write the file system refused (no space, no permission, a
    read-only disk, a directory gone): the path, why, and what to do; None for any
    other error. Every file a run writes goes to a temporary name first, so what failed
    left no part."""
    import errno

    if isinstance(error, OSError) and error.errno in (
            errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM):
        where = f"{error.filename}: " if error.filename else ""
        reason = f"{where}{os.strerror(error.errno)}"
    else:
        if not any(refusal in str(getattr(error, "message", "") or error)
                   for refusal in _IO_REFUSALS):
            return None
        reason = short_reason(error, 300)
    return (f"{reason}: {DISK_ADVICE}; what the run finished (checkpoints, converted "
            "records) is kept")


def app_main(app_module):
    """The `main(argv)` of a run_* script: no positional arguments, the options from
    the flags (`app_module.options_from_flags`) to `app_module.run` (`run_script`)."""
    def main(argv):
        from absl import app

        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
        run_script(app_module.run, app_module.options_from_flags)
    return main


def program(main, doc: str, required=("output_dir",)) -> None:
    """Runs an absl script's `main` with `required` flags, whether started as
    `python <script>.py` or as its installed command: `--help` shows `doc` and the
    program's flags (absl shows the __main__ module's docstring and the flags it
    defines; here the modules of albert_tf define them). An `app.UsageError` of `main`
    is one line, `error: <why>` (exit status 1), as the other bad input."""
    import sys

    from absl import app

    sys.modules["__main__"].__doc__ = doc
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        if module.startswith("albert_tf."):  # a --task_module's options too
            for flag in defined:
                flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    for name in required:
        flags.mark_flag_as_required(name)

    def one_line_usage_errors(argv):
        # absl would print the usage and every flag's help before an app.UsageError
        try:
            return main(argv)
        except app.UsageError as e:
            raise SystemExit(f"error: {e}") from None

    app.run(one_line_usage_errors)
