"""Input globs and output shard names, as the original script's `--input_file` and
`--output_file` take them."""

from __future__ import annotations

import collections
import glob
import os
import re
from typing import Sequence

import tensorflow as tf

from albert_tf import fileio
from albert_tf.data.pretraining.config import PretrainingDataError


def _items(spec: str | Sequence[str]) -> list[str]:
    """A comma-separated string or a list, stripped, without empty items."""
    if isinstance(spec, str):
        spec = spec.split(",")
    return [item for item in (s.strip() for s in spec) if item]


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Comma-separated (or listed) globs -> files, each glob's matches sorted.

    Raises `PretrainingDataError` naming any pattern that matches no file.
    """
    files, unmatched = [], []
    for pattern in _items(patterns):
        matches = sorted(tf.io.gfile.glob(pattern) if fileio.is_url(pattern)
                         else (m for m in glob.glob(pattern) if os.path.isfile(m)))
        if not matches:
            unmatched.append(pattern)
        files.extend(matches)
    if unmatched:
        raise PretrainingDataError(
            f"input_file: no file matches {', '.join(repr(p) for p in unmatched)}")
    if not files:
        raise PretrainingDataError("input_file: no input files given")
    return files


_SHARDED = re.compile(r"^(?P<base>.+)@(?P<count>\d+)$")


def expand_output_files(spec: str | Sequence[str]) -> list[str]:
    """Comma-separated (or listed) output paths; `path@N` stands for the N shards
    `path-00000-of-0000N` .. (instances go to the files in turn, as in the original)."""
    files = []
    for item in _items(spec):
        match = _SHARDED.match(item)
        if match:
            count = int(match["count"])
            if count < 1:
                raise PretrainingDataError(f"output_file: {item!r} asks for no shards")
            files.extend(f"{match['base']}-{i:05d}-of-{count:05d}" for i in range(count))
        else:
            files.append(item)
    if not files:
        raise PretrainingDataError("output_file: no output files given")
    duplicates = [f for f, n in collections.Counter(files).items() if n > 1]
    if duplicates:
        raise PretrainingDataError(f"output_file: {duplicates[0]!r} is named twice")
    return files


def check_no_clash(inputs: Sequence[str], outputs: Sequence[str]) -> None:
    """Refuses an output that is also an input (it would be truncated before read)."""
    clash = (set(map(fileio.abspath_or_url, inputs))
             & set(map(fileio.abspath_or_url, outputs)))
    if clash:
        raise PretrainingDataError(f"output_file {sorted(clash)[0]} is also an input")
