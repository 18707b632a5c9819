"""`tf.train.Example` bytes of pretraining instances, written without TensorFlow.

The same wire format as `tf.train.Example.SerializeToString` (features in the
original's order, packed values), built with NumPy for a whole batch at once: worker
processes stay light and the serialization is not the bottleneck.
"""

from __future__ import annotations

import numpy as np

from albert_tf import names
from albert_tf.data.pretraining.features import FLOAT_FEATURES, feature_lengths
from albert_tf.data.pretraining.instances import InstanceBatch


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_tag: int, payload: bytes) -> bytes:
    return bytes([field_tag]) + _varint(len(payload)) + payload


def _varint_rows(matrix: np.ndarray) -> list[bytes]:
    """Each row of a non-negative integer matrix as packed protobuf varints."""
    rows, width = matrix.shape
    if matrix.size == 0 or matrix.max() < 0x80:  # one byte a value
        data = matrix.astype(np.uint8).tobytes()
        return [data[r * width:(r + 1) * width] for r in range(rows)]
    if matrix.min() < 0:
        raise ValueError("negative ids cannot be written")
    values = matrix.astype(np.uint64).ravel()
    num_bytes = np.ones(values.shape, np.int64)
    shift = 7
    while shift < 64 and (1 << shift) <= int(values.max()):
        num_bytes += values >= np.uint64(1 << shift)
        shift += 7
    groups = np.arange(num_bytes.max())
    digits = (values[:, None] >> (7 * groups).astype(np.uint64)) & np.uint64(0x7F)
    continued = groups[None, :] < num_bytes[:, None] - 1
    encoded = (digits | (continued.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    data = encoded[groups[None, :] < num_bytes[:, None]].tobytes()
    ends = np.cumsum(num_bytes.reshape(rows, width).sum(axis=1)).tolist()
    return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]


class ExampleEncoder:
    """Serializes pretraining instances as `tf.train.Example` protos, vectorized."""

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int):
        self.lengths = feature_lengths(max_seq_length, max_predictions_per_seq)
        self._prefixes: dict[tuple[str, int], bytes] = {}

    def _prefix(self, name: str, body_length: int) -> bytes:
        """Everything of a feature's map entry that comes before its packed values."""
        key = (name, body_length)
        if key not in self._prefixes:
            marker = b"\x00" * body_length  # stands for the values while measuring
            values = _length_delimited(0x0A, marker) if body_length else b""
            # Feature.float_list is field 2, Feature.int64_list field 3.
            feature = _length_delimited(0x12 if name in FLOAT_FEATURES else 0x1A, values)
            entry = (_length_delimited(0x0A, name.encode()) + _length_delimited(0x12, feature))
            whole = _length_delimited(0x0A, entry)
            self._prefixes[key] = whole[:len(whole) - body_length]
        return self._prefixes[key]

    def encode(self, batch: InstanceBatch) -> list[bytes]:
        """Serialized examples of a batch, zero-padded to the fixed lengths."""
        columns = self._columns(batch)
        examples = []
        for row in range(len(batch.labels)):
            body = b"".join([self._prefix(name, len(values[row])) + values[row]
                             for name, values in columns.items()])
            examples.append(b"\x0a" + _varint(len(body)) + body)
        return examples

    def _columns(self, batch: InstanceBatch) -> dict[str, list[bytes]]:
        """Each feature's packed values, row by row, in the original's order."""
        masked = batch.masked
        count = len(batch.labels)
        seq_len = self.lengths[names.INPUT_IDS]
        max_pred = self.lengths[names.MASKED_LM_POSITIONS]
        if np.any(masked.lengths > seq_len) or np.any(masked.num_masked > max_pred):
            raise ValueError("an instance is longer than the records' fixed lengths")
        # Row and column of every token, and of every prediction, in the padded arrays.
        rows = np.repeat(np.arange(count), masked.lengths)
        cols = np.arange(len(rows)) - np.repeat(masked.starts[:-1], masked.lengths)
        pred_rows = np.repeat(np.arange(count), masked.num_masked)
        pred_cols = (np.arange(len(pred_rows))
                     - np.repeat(masked.masked_starts[:-1], masked.num_masked))

        def padded(values, width, dtype, rows=rows, cols=cols):
            matrix = np.zeros((count, width), dtype)  # [K, width]
            matrix[rows, cols] = values
            return matrix

        def predictions(values, dtype):
            return padded(values, max_pred, dtype, pred_rows, pred_cols)

        return {
            names.INPUT_IDS: _varint_rows(padded(masked.input_ids, seq_len, np.int64)),
            names.INPUT_MASK: _varint_rows(padded(1, seq_len, np.int8)),
            names.SEGMENT_IDS: _varint_rows(padded(cols >= batch.segment_a_lengths[rows],
                                                   seq_len, np.int8)),
            names.TOKEN_BOUNDARY: _varint_rows(
                padded(masked.token_boundary, seq_len, np.int8)),
            names.MASKED_LM_POSITIONS: _varint_rows(
                predictions(masked.masked_lm_positions, np.int64)),
            names.MASKED_LM_IDS: _varint_rows(predictions(masked.masked_lm_ids, np.int64)),
            names.MASKED_LM_WEIGHTS: [row.tobytes() for row in predictions(1.0, "<f4")],
            names.NEXT_SENTENCE_LABELS: _varint_rows(batch.labels.reshape(count, 1)),
        }
