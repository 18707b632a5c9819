"""What a resumed pretraining run pays to find its place in the data stream.

    python benchmarks/bench_resume.py --input_text=../shared/data/text/tinyshakespeare.txt \\
        --spm_model_file=../shared/data/spm/albert_en_30k_reconstructed.model

A run resumed at step N reads the batches the uninterrupted run would have read from
N on: the training stream skipped N batches in (`Trainer.train(dataset_fn(skip))`), which
regenerates the skipped part (read and shuffle; for `--input_text` also tokenize, pair and
mask). This measures the time to the first batch after skipping N batches, for offline
records (`create_pretraining_data`) and for the dynamic stream of `--input_text`, the two
`run_pretraining.py` inputs, with the scripts' seeds and buffers. Prints one Markdown table
and the machine's CPU flags; the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def first_batch_seconds(dataset_fn, skip: int) -> float:
    began = time.perf_counter()
    next(iter(dataset_fn(skip)))
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_text", required=True)
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--skips", default="0,1000,5000", help="comma-separated batch counts")
    args = parser.parse_args()

    from bench_own_tasks import cpu_flags

    from albert_tf.data import dynamic_masking, pretraining
    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file=None, do_lower_case=True,
                              spm_model_file=args.spm_model_file)
    config = pretraining.PretrainingDataConfig(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq, dupe_factor=2,
        random_seed=12345)
    skips = [int(s) for s in args.skips.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        began = time.perf_counter()
        spec = pretraining.TokenizerSpec(spm_model_file=args.spm_model_file,
                                         do_lower_case=True)
        stats = pretraining.create_pretraining_data(
            args.input_text, f"{work}/records@4", spec, config, num_workers=0)
        created = time.perf_counter() - began
        streams = {
            "records": lambda skip: pretraining.pretraining_dataset(
                stats.output_files, args.batch_size, seed=12345,
                max_seq_length=args.max_seq_length,
                max_predictions_per_seq=args.max_predictions_per_seq).skip(skip),
            "input_text": lambda skip: dynamic_masking.dynamic_pretraining_dataset(
                args.input_text, tokenizer, args.batch_size, config,
                stream=dynamic_masking.StreamOptions(drop_remainder=True)).skip(skip),
        }
        for name, dataset_fn in streams.items():
            first_batch_seconds(dataset_fn, 0)  # warm: graph building, file cache
            seconds = {skip: first_batch_seconds(dataset_fn, skip) for skip in skips}
            base = seconds[skips[0]]
            for skip in skips:
                rate = (skip - skips[0]) / (seconds[skip] - base) \
                    if skip > skips[0] and seconds[skip] > base else float("nan")
                rows.append((name, skip, seconds[skip], rate))
    print(f"{stats.num_instances} instances from {args.input_text} "
          f"(create_pretraining_data: {created:.1f} s); batch {args.batch_size} x "
          f"{args.max_seq_length}")
    print("| stream | batches skipped | seconds to the first batch | skipped batches/s |")
    print("|---|---:|---:|---:|")
    for name, skip, seconds, rate in rows:
        print(f"| {name} | {skip} | {seconds:.2f} | "
              f"{'' if rate != rate else f'{rate:.0f}'} |")
    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
