"""The errors that mean bad input from the user, wherever they are raised.

Every error of the package that says the flags, the files or the arguments given
cannot make what was asked derives from `UserError`: a script reports it as one line,
`error: <message>`, with exit status 1, instead of a traceback
(`albert_tf.apps.runner.run_script`). Each room keeps its own kind (`DataError`,
`ConfigError`, `CheckpointError`, `ExportError`, ...); this module imports nothing of
the package, so any room can derive from it.
"""

import re


class UserError(ValueError):
    """Bad input from the user: reported as one line, `error: <message>`, exit status 1."""


class UsageError(UserError):
    """Flags or files that cannot make a run: reported before any training starts."""


# What to do about a write the file system refused (no space, no permission, a
# directory gone), in every one-line message of such a failure.
DISK_ADVICE = ("check the disk there (free space, permissions, the directory still in "
               "place) and rerun the same command")


def short_reason(error: BaseException, limit: int = 200) -> str:
    """What `error` says, on one line, for a one-line message: its first line without
    TensorFlow's `{{function_node ...}}` prefixes, and where longer than `limit` its end
    (where a file system says why: "...; No space left on device")."""
    text = str(getattr(error, "message", "") or error).strip()
    first = re.sub(r"\{\{[^}]*\}\}\s*", "", text.splitlines()[0] if text else "").strip()
    return first if len(first) <= limit else "..." + first[-(limit - 3):]
