"""Data: pretraining instances, GLUE / SQuAD / RACE features, tf.data pipelines."""
