"""`DataError`: input data that cannot be read as its task needs (a file, a line, a
field). Each reader's error is one (`GlueDataError`, `NerDataError`, ...), and a task
module of your own raises it (`albert_tf.tasks.DataError`): the scripts print it as one
message, naming the file, line and field, instead of a stack trace.
"""

from albert_tf.errors import UserError


class DataError(UserError):
    """Bad input data, named where it is."""
