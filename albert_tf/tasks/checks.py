"""The checks of a run's options that the tasks make before any work, and that the
scripts share (`albert_tf.apps` imports them from here): the splits a run reads
(`wanted_splits`), the files its flags name (`check_file`), something to do, a tokenizer
and a trained model where the run needs one (`check_run`), and windows that can be cut
(`check_long_text`). Options that cannot make a run raise `albert_tf.errors.UsageError`.

A module of the tasks' layer: it imports nothing of the scripts (`albert_tf.apps`).
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf import fileio, packing
from albert_tf.errors import UsageError

BEST_CHECKPOINT = "model.ckpt-best"  # the original's name for the kept checkpoint
LORA_ADAPTER = "lora_adapter.npz"  # --lora_rank: the best checkpoint's adapter, beside it


def check_file(path, flag: str) -> str:
    if not path:
        raise UsageError(f"--{flag} is required")
    path = os.fspath(path)
    if not fileio.exists(path):
        raise UsageError(f"--{flag}={path} does not exist")
    return path


def wanted_splits(options) -> list[str]:
    """The splits a fine-tuning run reads: train, dev, test for --do_train, --do_eval,
    --do_predict."""
    return [s for s, on in (("train", options.do_train), ("dev", options.do_eval),
                            ("test", options.do_predict)) if on]


def given_file(options, split: str) -> str | None:
    """The value of `--<split>_file` (train, dev or test), or None."""
    return {"train": options.train_file, "dev": options.dev_file,
            "test": options.test_file}[split]


def check_run(options) -> None:
    """What run_classifier.py and run_ner.py check first: something to do, a tokenizer
    file that exists, and a trained model in --output_dir (a checkpoint or
    model.ckpt-best) for --do_eval / --do_predict without --do_train."""
    if not wanted_splits(options):
        raise UsageError("nothing to do: give --do_train, --do_eval or --do_predict")
    if not (options.spm_model_file or options.vocab_file):
        raise UsageError("give --spm_model_file (or --vocab_file for WordPiece)")
    for flag, path in (("spm_model_file", options.spm_model_file),
                       ("vocab_file", options.vocab_file)):
        if path:
            check_file(path, flag)
    output_dir = options.output_dir or ""
    trained = tf.io.gfile.isdir(output_dir) and (
        tf.train.latest_checkpoint(output_dir) or tf.io.gfile.exists(
            os.path.join(output_dir, BEST_CHECKPOINT + ".index")))
    if not options.do_train and not trained:
        raise UsageError(
            f"--do_eval/--do_predict without --do_train need a trained model in "
            f"--output_dir={options.output_dir}, and there is none")


def check_long_text(options, is_pair: bool, max_qa_length: int | None = None,
                    weights: bool = False) -> None:
    """`--long_text` and `--window_stride` (`LongTextOptions`) that can cut a text of
    the run (`is_pair`: a pair; `max_qa_length`: a multiple-choice context, beside
    endings of up to that many pieces) into windows: `--window_stride` only with
    windows, and smaller than the shortest window `--max_seq_length` gives (a pair's:
    half of `max_seq_length - 3`, beside its other text kept to the other half; a
    context's: `max_seq_length - 3 - max_qa_length`), which must hold two pieces at
    least (for a stride of one). `--window_weight` other than one only with windows,
    and only where the task `weights` its windows; `--max_windows_per_text` only with
    windows."""
    stride, length = options.window_stride, options.max_seq_length
    weight, cap = options.window_weight, options.max_windows_per_text
    if cap and options.long_text != packing.WINDOWS:
        raise UsageError(f"--max_windows_per_text={cap} is for --long_text=windows "
                         f"(--long_text={options.long_text} reads no window)")
    if weight != packing.WINDOW_WEIGHT_ONE:
        if options.long_text != packing.WINDOWS:
            raise UsageError(f"--window_weight={weight} is for --long_text=windows "
                             f"(--long_text={options.long_text} reads no window)")
        if not weights:
            raise UsageError(f"--window_weight={weight}: only classification and "
                             "regression weigh their windows")
    if options.long_text != packing.WINDOWS:
        if stride is not None:
            raise UsageError(f"--window_stride={stride} is for --long_text=windows "
                             f"(--long_text={options.long_text} reads no window)")
        return
    window = packing.smallest_window(length, is_pair, max_qa_length)
    if max_qa_length is not None:
        what = (f"a context's windows {window} piece(s) (--max_seq_length - 3 - "
                f"--max_qa_length={max_qa_length}, beside the longest question + choice)")
    elif is_pair:
        what = (f"a pair's windows {window} piece(s) (half of --max_seq_length - 3, the "
                "other text keeping up to the other half)")
    else:
        what = f"a text's windows {window} piece(s) (--max_seq_length - 2)"
    if window < 2:
        least = next(m for m in range(length, length + 8 + (max_qa_length or 0))
                     if packing.smallest_window(m, is_pair, max_qa_length) >= 2)
        raise UsageError(f"--long_text=windows: --max_seq_length={length} leaves {what}, "
                         f"too few to slide (two at least): give --max_seq_length="
                         f"{least} or more"
                         + (" or a smaller --max_qa_length" if max_qa_length else ""))
    if stride is not None and stride >= window:
        raise UsageError(f"--window_stride={stride} must be smaller than the window: "
                         f"--max_seq_length={length} gives {what}; give "
                         f"--window_stride={packing.default_window_stride(window)} (half "
                         f"the window) or less, or a larger --max_seq_length")
