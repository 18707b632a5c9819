"""What the input pipelines' graph functions share."""

import tensorflow as tf

# The functions given to tf.data (and the pipelines' own tf.functions) are plain
# TensorFlow ops: traced without AutoGraph's conversion of their source, which is faster
# (AutoGraph parsed and rewrote each function and every function it calls, in every
# process) and changes nothing. A Python `if` or `for` over a tensor then fails when
# traced instead of becoming a graph conditional or loop.
graph_function = tf.autograph.experimental.do_not_convert
