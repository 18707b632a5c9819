"""The worker pool: chunks processed in parallel processes, results in corpus order."""

from __future__ import annotations

import collections
import gc
import multiprocessing
import os
from typing import Iterable, Iterator

from albert_tf.data.pretraining.chunks import ChunkProcessor, ChunkResult
from albert_tf.data.pretraining.config import PretrainingDataConfig, TokenizerSpec
from albert_tf.data.pretraining.corpus import Chunk

_WORKER: ChunkProcessor | None = None


def _init_worker(tokenizer_spec: TokenizerSpec, config: PretrainingDataConfig) -> None:
    global _WORKER
    _WORKER = ChunkProcessor(tokenizer_spec, config)


def _process_in_worker(chunk: Chunk) -> ChunkResult:
    return _WORKER(chunk)


def ordered_parallel_map(pool, items: Iterable[Chunk], window: int
                         ) -> Iterator[ChunkResult]:
    """Results in input order, with at most `window` chunks in flight, so that reading
    never runs ahead of writing by more than that."""
    pending: collections.deque = collections.deque()
    for item in items:
        pending.append(pool.apply_async(_process_in_worker, (item,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


def default_num_workers() -> int:
    """One worker per CPU this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def start_pool(num_workers: int, tokenizer_spec: TokenizerSpec,
               config: PretrainingDataConfig):
    """Worker processes, forked where possible: they share this process's imported
    modules (TensorFlow among them) instead of importing them again, and never call
    TensorFlow. `gc.freeze` keeps the workers' garbage collector off the inherited
    objects, so that their memory pages stay shared instead of being copied."""
    fork = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else "spawn")
    gc.freeze()
    try:
        return context.Pool(num_workers, initializer=_init_worker,
                            initargs=(tokenizer_spec, config))
    finally:
        gc.unfreeze()
