"""The driver: text files in, pretraining TFRecords out (`create_pretraining_data.py`)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Iterable, Iterator, Sequence

from absl import logging

from albert_tf.data import records
from albert_tf.data.pretraining import workers
from albert_tf.data.pretraining.chunks import ChunkProcessor, ChunkResult
from albert_tf.data.pretraining.config import (
    PretrainingDataConfig,
    PretrainingDataError,
    TokenizerSpec,
)
from albert_tf.data.pretraining.corpus import read_chunks
from albert_tf.data.pretraining.files import (
    check_no_clash,
    expand_input_patterns,
    expand_output_files,
)
from albert_tf.data.report import DataReport, SkipLimit, SkipLog


@dataclasses.dataclass
class CreationStats:
    num_instances: int = 0
    num_documents: int = 0
    num_chunks: int = 0
    num_skipped: int = 0  # lines and documents
    seconds: float = 0.0
    output_files: list[str] = dataclasses.field(default_factory=list)

    @property
    def instances_per_second(self) -> float:
        return self.num_instances / max(self.seconds, 1e-9)


def create_pretraining_data(input_files: str | Sequence[str],
                            output_files: str | Sequence[str],
                            tokenizer_spec: TokenizerSpec,
                            config: PretrainingDataConfig = PretrainingDataConfig(),
                            num_workers: int | None = None,
                            log_every_seconds: float = 10.0,
                            max_skipped_rows: SkipLimit | str | None = None) -> CreationStats:
    """Writes pretraining TFRecords from text files, as the original script does.

    Args:
      input_files: paths or globs (a string may hold several, comma-separated).
      output_files: paths (comma-separated in a string; `path@N` for N shards);
        instances go to them in turn.
      tokenizer_spec: the vocabulary / SentencePiece model and `do_lower_case`.
      num_workers: worker processes (default: one per CPU); 0 works in this process.
        The output does not depend on it.
      max_skipped_rows: the most input lines that may be skipped (not UTF-8, a NUL
        byte, too long): a fraction of the lines read or a count
        (`albert_tf.data.report.SkipLimit`; default 1%).

    Raises:
      PretrainingDataError: bad settings, an input glob that matches nothing, or no
        usable text at all; `TooManySkipped`: more bad lines than `max_skipped_rows`
        (then no output file is written).
    """
    report = DataReport(max_skipped_rows)
    config.validate()
    inputs = expand_input_patterns(input_files)
    outputs = expand_output_files(output_files)
    check_no_clash(inputs, outputs)
    num_workers = workers.default_num_workers() if num_workers is None else num_workers
    if num_workers < 0:
        raise PretrainingDataError(f"num_workers must be at least 0, got {num_workers}")
    processor = ChunkProcessor(tokenizer_spec, config)  # also checks the tokenizer files
    logging.info("reading %d input files (%s%s) with %d workers", len(inputs),
                 ", ".join(inputs[:3]), ", ..." if len(inputs) > 3 else "", num_workers)

    with report.reading("input", "the input text"):
        line_skips = SkipLog("input line")
    chunks = read_chunks(inputs, config.chunk_bytes, config.max_line_bytes, line_skips)
    stats = CreationStats(output_files=outputs)
    with contextlib.ExitStack() as stack:
        if num_workers == 0:
            results: Iterator[ChunkResult] = map(processor, chunks)
        else:
            pool = stack.enter_context(workers.start_pool(num_workers, tokenizer_spec, config))
            results = workers.ordered_parallel_map(pool, chunks, window=num_workers + 1)
        writers = [stack.enter_context(records.atomic_tfrecord_writer(path))
                   for path in outputs]
        _write_all(results, writers, stats, line_skips, log_every_seconds)
        if stats.num_instances == 0:  # the writers then delete their temporary files
            raise PretrainingDataError(
                f"no usable text in {', '.join(inputs)}: no document gave an instance"
                + (f" ({stats.num_skipped} lines or documents skipped)"
                   if stats.num_skipped else ""))
        logging.info("%s", report.summary())
        report.check()
    logging.info("wrote %d instances from %d documents to %d files in %.1f s "
                 "(%.0f instances/s)", stats.num_instances, stats.num_documents,
                 len(outputs), stats.seconds, stats.instances_per_second)
    return stats


def _write_all(results: Iterable[ChunkResult], writers: list, stats: CreationStats,
               line_skips: SkipLog, log_every_seconds: float) -> None:
    """Writes the chunks' records to the writers in turn, as the original does;
    reports skipped input and progress."""
    document_skips = SkipLog("document")
    start = last_log = time.monotonic()
    for result in results:
        for where, why in result.skipped:
            document_skips.skip(where, "no tokens", why)
        for record in result.records:
            writers[stats.num_instances % len(writers)].write(record)
            stats.num_instances += 1
        stats.num_documents += result.num_documents
        stats.num_chunks += 1
        if time.monotonic() - last_log >= log_every_seconds:
            last_log = time.monotonic()
            logging.info("%d instances from %d documents (%.0f instances/s)",
                         stats.num_instances, stats.num_documents,
                         stats.num_instances / (last_log - start))
    stats.seconds = time.monotonic() - start
    stats.num_skipped = line_skips.count + document_skips.count
    document_skips.kept = stats.num_documents
    document_skips.summary()
