"""The records' path of a long text, for the tests of what reads it in windows (the
exports, the Keras text models): the id model on each text's windows as the records
make them (`sentence_records.pack_windows`), pooled as the runs pool them
(`pool_windows`)."""

from __future__ import annotations

import numpy as np

from albert_tf import names
from albert_tf.data import sentence_records


def window_outputs(model, tokenizer, rows, max_seq_length: int, stride, pooling
                   ) -> tuple[dict, dict]:
    """(the model's outputs on every window of `rows` (texts, or (text_a, text_b or
    None) pairs), with each window's `example_index`; those outputs pooled per row by
    `pooling`, a `sentence_records.WindowPooling`)."""
    windows, index = [], []
    for i, row in enumerate(rows):
        a, b = (row, None) if isinstance(row, str) else row
        made = sentence_records.pack_windows(
            tokenizer.encode(a), tokenizer.encode(b) if b is not None else None,
            max_seq_length, tokenizer, stride)
        windows += made
        index += [i] * len(made)
    inputs = names.to_model_inputs({k: np.stack([w[k] for w in windows])
                                    for k in names.RECORD_SEQUENCES})
    outputs = {k: v.numpy() for k, v in model(inputs, training=False).items()}
    outputs[names.EXAMPLE_INDEX] = np.array(index)
    return outputs, sentence_records.pool_windows(outputs, pooling)
