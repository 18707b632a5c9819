"""Files, local or remote (gs://, ...), written so that no reader sees half of one.

Every writer of the toolkit goes through `atomic_path`: the content is written under a
temporary name beside the target and renamed onto it only when complete, and removed
when anything fails. Paths with a scheme (`gs://...`) go through `tf.io.gfile`, local
ones through Python's own `open` (faster for large reads).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Iterator

import tensorflow as tf


def is_url(path) -> bool:
    """True for a path with a scheme (gs://, hdfs://, ...), read through tf.io.gfile."""
    return "://" in os.fspath(path)


def abspath_or_url(path) -> str | None:
    """An absolute local path, or the URL unchanged; None for no path."""
    if not path:
        return None
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(path)


def open_binary(path):
    """A local file with `open`, a URL with `tf.io.gfile`, for reading bytes."""
    path = os.fspath(path)
    return tf.io.gfile.GFile(path, "rb") if is_url(path) else open(path, "rb")


def read_bytes(path) -> bytes:
    with open_binary(path) as f:
        return f.read()


def read_text(path, error: type[Exception] = ValueError) -> str:
    """A UTF-8 text file (a leading byte-order mark dropped); bytes that are not UTF-8
    raise `error` naming the file and the offset."""
    try:
        return read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{path} is not UTF-8 (byte offset {e.start})") from None


def exists(path) -> bool:
    return tf.io.gfile.exists(os.fspath(path))


def remove_if_exists(path) -> None:
    path = os.fspath(path)
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


@contextlib.contextmanager
def atomic_path(path, suffixes: tuple[str, ...] = ("",)) -> Iterator[str]:
    """Yields a temporary path beside `path`; when the block succeeds, renames
    `<temporary><suffix>` onto `<path><suffix>` for each suffix (a TF checkpoint is
    two files: `.index` and `.data-...`), else removes them. Creates the directory."""
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
        yield tmp
        for suffix in suffixes:
            tf.io.gfile.rename(tmp + suffix, path + suffix, overwrite=True)
    finally:
        for suffix in suffixes:
            remove_if_exists(tmp + suffix)


@contextlib.contextmanager
def atomic_directory(path) -> Iterator[str]:
    """Yields a new, empty temporary directory beside `path` (its name starts with a dot,
    so scans for integer versions skip it); when the block succeeds, renames it to
    `path`, which must not exist (a written directory, such as a SavedModel version, is
    never replaced), else removes it with all it holds."""
    path = os.fspath(path).rstrip("/")
    parent, base = os.path.split(path)
    tmp = os.path.join(parent, f".tmp-{base}-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(tmp)
    try:
        yield tmp
        if tf.io.gfile.exists(path):
            raise FileExistsError(f"{path} appeared while it was written; not replaced")
        tf.io.gfile.rename(tmp, path)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)


def write_text_atomically(path, text: str) -> None:
    """Writes `text` (UTF-8) to `path` under a temporary name, then renames it."""
    with atomic_path(path) as tmp, tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)


def write_bytes_atomically(path, data: bytes) -> None:
    with atomic_path(path) as tmp, tf.io.gfile.GFile(tmp, "wb") as f:
        f.write(data)


def integer_subdirectories(directory) -> list[int]:
    """The integer-named subdirectories of `directory` (SavedModel versions), sorted;
    [] when it does not exist."""
    directory = os.fspath(directory)
    if not tf.io.gfile.isdir(directory):
        return []
    return sorted(int(name.rstrip("/")) for name in tf.io.gfile.listdir(directory)
                  if name.rstrip("/").isdigit()
                  and tf.io.gfile.isdir(os.path.join(directory, name.rstrip("/"))))
