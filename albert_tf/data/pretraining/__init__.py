"""Pretraining data: raw text -> masked-LM + sentence-order TFRecords, and back.

Input and output are the original google-research/albert `create_pretraining_data.py`
formats: text with one sentence per line and a blank line between documents in; TFRecords
with `input_ids`, `input_mask`, `segment_ids`, `token_boundary` (int64, `max_seq_length`,
zero-padded), `masked_lm_positions`, `masked_lm_ids` (int64, zero-padded),
`masked_lm_weights` (float, 1.0 then 0.0, all three `max_predictions_per_seq` long) and
`next_sentence_labels` (int64, 1) out. Each instance is drawn as the original draws it
(pairing and sentence-order swap, `short_seq_prob` targets, random-front/back
truncation, masking in `albert_tf.data.masking`).

The modules follow the data:

    config           the original flags (`PretrainingDataConfig`), the tokenizer files
    files            input globs, output shards
    corpus           text files -> chunks of whole documents
    instances        tokenized documents -> pairs, truncated, masked
    example_encoder  instances -> tf.train.Example bytes (NumPy, no TensorFlow)
    chunks           one chunk -> its shuffled records (the unit of work)
    workers          the process pool
    create           the driver: `create_pretraining_data`
    features, reader the record format, and batches read back (`pretraining_dataset`)

Where this differs from the original, on purpose:

- Text is streamed in *chunks* of whole documents (`chunk_bytes` of input each), each
  processed on its own: memory does not grow with the corpus, and chunks spread over
  worker processes. The original holds every document and every instance in memory.
- So the instances are shuffled within a chunk (not over the whole corpus), and the
  "random other document" that a one-segment chunk (and NSP with
  `random_next_sentence`) pairs with is drawn from the documents of the same chunk,
  not from the whole corpus.
- Every draw comes from generators seeded by `(random_seed, chunk index)`: the output is
  byte-identical for a seed, whatever the number of workers. (The original draws n-gram
  lengths from NumPy's unseeded global generator.)
- Each input file starts a new document (the original lets a file's last document run
  on into the next file). Lines that are not UTF-8 or are longer than `max_line_bytes`,
  and documents with no tokens, are skipped with a warning naming file and line (the
  original stops on bad UTF-8); a corpus with nothing usable is an error.
- Outputs are written under temporary names and renamed when complete.
"""

from albert_tf.data.pretraining.chunks import ChunkProcessor, ChunkResult, chunk_generators
from albert_tf.data.pretraining.config import (
    PretrainingDataConfig,
    PretrainingDataError,
    TokenizerSpec,
)
from albert_tf.data.pretraining.corpus import Chunk, Document, read_chunks, read_lines
from albert_tf.data.pretraining.create import CreationStats, create_pretraining_data
from albert_tf.data.pretraining.example_encoder import ExampleEncoder
from albert_tf.data.pretraining.features import (
    FEATURE_NAMES,
    FLOAT_FEATURES,
    PREDICTION_FEATURES,
    SEQUENCE_FEATURES,
    feature_lengths,
    pretraining_feature_spec,
)
from albert_tf.data.pretraining.files import expand_input_patterns, expand_output_files
from albert_tf.data.pretraining.instances import (
    InstanceBatch,
    InstanceMaker,
    SegmentPair,
    truncation_counts,
)
from albert_tf.data.pretraining.reader import pretraining_dataset, record_lengths
from albert_tf.data.pretraining.workers import default_num_workers

__all__ = [
    "Chunk", "ChunkProcessor", "ChunkResult", "CreationStats", "Document", "ExampleEncoder",
    "FEATURE_NAMES", "FLOAT_FEATURES", "InstanceBatch", "InstanceMaker",
    "PREDICTION_FEATURES", "PretrainingDataConfig", "PretrainingDataError",
    "SEQUENCE_FEATURES", "SegmentPair", "TokenizerSpec", "chunk_generators",
    "create_pretraining_data", "default_num_workers", "expand_input_patterns",
    "expand_output_files", "feature_lengths", "pretraining_dataset",
    "pretraining_feature_spec", "read_chunks", "read_lines", "record_lengths",
    "truncation_counts",
]
