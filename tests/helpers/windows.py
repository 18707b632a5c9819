"""The records' path of a long text, for the tests of what reads it in windows (the
exports, the Keras text models): the id model on each text's windows as the records
make them (`sentence_records.pack_windows`; a multiple-choice context's
`choice_records.convert_example_windows`), pooled as the runs pool them
(`pool_windows`)."""

from __future__ import annotations

import numpy as np

from albert_tf import names
from albert_tf.data import choice_records, sentence_records


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


def choice_windows(tokenizer, rows, max_seq_length, max_qa_length, num_choices=4,
                   stride=None, max_windows=0):
    """The records `choice_records.convert_example_windows` makes of each row (a dict
    of `context`, `question`, `choices`, and `id`, `label` where given), by row."""
    return [choice_records.convert_example_windows(
        choice_records.ChoiceExample(r.get("id", str(i)), tokenizer.preprocess(r["context"]), [
            choice_records.make_ending(tokenizer.preprocess(r["question"]),
                                       tokenizer.preprocess(c)) for c in r["choices"]],
            r.get("label", -1)), i, max_seq_length, max_qa_length, tokenizer, num_choices,
        stride, max_windows) for i, r in enumerate(rows)]


def choice_window_outputs(model, tokenizer, rows, max_seq_length: int, max_qa_length: int,
                          stride, pooling) -> tuple[dict, dict]:
    """`window_outputs` of multiple-choice rows (`choice_windows`'): the outputs of
    `model` (an `AlbertMultipleChoice`) on every window record, with its
    `example_index`; those pooled per row by `pooling`."""
    windows = [f for features in choice_windows(tokenizer, rows, max_seq_length,
                                                max_qa_length, model.num_choices, stride)
               for f in features]
    inputs = names.to_model_inputs({
        name: np.array([getattr(f, field) for f in windows])
        for name, field in zip(names.RECORD_SEQUENCES,
                               ("input_ids", "input_mask", "segment_ids"))})
    outputs = {k: v.numpy() for k, v in model(inputs, training=False).items()}
    outputs[names.EXAMPLE_INDEX] = np.array([f.example_index for f in windows])
    return outputs, sentence_records.pool_windows(outputs, pooling)
