"""One run per output directory: a lock file that a crashed run does not leave stuck.

`acquire(output_dir)` creates `<output_dir>/.albert_tf.lock` (atomically, O_EXCL) holding
the process id, host and start time, and removes it when the process exits. A second run
on the directory while the owner lives stops with `OutputDirLocked`, naming the
directory and the owner; a lock whose owner is no longer running (killed, crashed) is
taken over with a warning. The owner is known to be gone only on the same host: a lock
taken on another host is respected (the message says which file to remove if that run
is over). Directories on remote file systems (`gs://...`) are not locked.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import time

from absl import logging

from albert_tf.errors import UserError

LOCK_NAME = ".albert_tf.lock"


class OutputDirLocked(UserError):
    """Another live run uses the output directory."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            owner = json.load(f)
        return owner if isinstance(owner, dict) and isinstance(owner.get("pid"), int) \
            else None
    except (OSError, ValueError):
        return None


def acquire(output_dir: str) -> str | None:
    """Locks `output_dir` for this process (see the module's docstring); returns the
    lock file (None for a remote directory). Taking a lock this process holds is a
    no-op."""
    output_dir = os.fspath(output_dir)
    if "://" in output_dir:
        logging.info("%s is remote: not locked against concurrent runs", output_dir)
        return None
    path = os.path.join(output_dir, LOCK_NAME)
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = _read(path)
            if owner is None:  # half-written by a run that died at once
                logging.warning("%s is unreadable: taking it over", path)
            elif owner["pid"] == me["pid"] and owner.get("host") == me["host"]:
                return path
            elif owner.get("host") != me["host"]:
                raise OutputDirLocked(
                    f"--output_dir={output_dir} is in use by process {owner['pid']} on "
                    f"{owner.get('host')} (since {owner.get('started')}); if that run is "
                    f"over, remove {path}") from None
            elif _alive(owner["pid"]):
                raise OutputDirLocked(
                    f"--output_dir={output_dir} is in use by another run: process "
                    f"{owner['pid']} (since {owner.get('started')}); wait for it to end or "
                    f"use another --output_dir") from None
            else:
                logging.warning("taking over %s from process %d, which is no longer "
                                "running (it did not end cleanly)", path, owner["pid"])
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(me, f)
        atexit.register(release, path)
        return path
    raise OutputDirLocked(f"could not lock --output_dir={output_dir}: {path} keeps "
                          f"appearing (another run starting at the same time?)")


def release(path: str) -> None:
    """Removes the lock if this process holds it."""
    owner = _read(path)
    if owner is not None and owner["pid"] == os.getpid():
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
