"""SQuAD v1.1 and v2.0 for ALBERT: examples, features, TFRecords, cached features.

The features are those of the original google-research/albert `squad_utils.py` for the
same input and settings: the question's pieces (at most `max_query_length`), the
paragraph's pieces cut into windows of `doc_stride`, `[CLS] question [SEP] window [SEP]`,
`p_mask` (1 on the question, on both `[SEP]` and on padding), answer positions found by
the original's character-level alignment (a banded longest common subsequence) between
the raw paragraph and the text of its SentencePiece pieces, positions 0/0 and
`is_impossible` for v2 unanswerable questions and for training windows that miss the
answer, `unique_id` counting from 1000000000. Records use the original `run_squad_v1.py` /
`run_squad_v2.py` feature names, so either side reads what the other writes.

The data flows through one module per step:

- `examples`: SQuAD JSON -> `SquadExample` (bad questions skipped, named in a warning);
- `alignment`: a paragraph's pieces <-> its raw characters (`align_paragraph`);
- `features`: examples -> `SquadFeature`, one per window (`iter_features`), and
  `span_text`, which maps a predicted token span back to paragraph text;
- `records`: features <-> original-format TFRecords, and batches of them;
- `cache`: `load_or_build_features`, the records plus a JSON description of what
  post-processing needs, rebuilt when anything that shaped them changed.

Every public name is importable from here (`from albert_tf.data import squad`).
"""

from albert_tf.data.cache import META_SUFFIX
from albert_tf.data.squad.alignment import ParagraphAlignment, align_paragraph
from albert_tf.data.squad.cache import (
    FEATURE_FORMAT_VERSION,
    SquadFeatureFile,
    load_or_build_features,
)
from albert_tf.data.squad.examples import (
    ORIGINAL_TRAIN_SHUFFLE_SEED,
    SquadError,
    SquadExample,
    read_squad_examples,
    shuffle_examples,
)
from albert_tf.data.squad.features import (
    FIRST_UNIQUE_ID,
    SquadFeature,
    convert_examples_to_features,
    doc_spans,
    iter_features,
    max_context_span,
    span_text,
    validate_settings,
    window_p_mask,
)
from albert_tf.data.squad.records import (
    PADDING_VALUES,
    RECORD_LAYOUT,
    SEQUENCE_FEATURES,
    feature_to_record,
    read_feature_records,
    record_feature_names,
    record_spec,
    squad_dataset,
    write_features,
)

__all__ = [
    "FEATURE_FORMAT_VERSION", "FIRST_UNIQUE_ID", "META_SUFFIX", "ORIGINAL_TRAIN_SHUFFLE_SEED",
    "PADDING_VALUES", "RECORD_LAYOUT", "SEQUENCE_FEATURES", "ParagraphAlignment",
    "SquadError", "SquadExample", "SquadFeature", "SquadFeatureFile", "align_paragraph",
    "convert_examples_to_features", "doc_spans", "feature_to_record", "iter_features",
    "load_or_build_features", "max_context_span", "read_feature_records",
    "read_squad_examples", "record_feature_names", "record_spec", "shuffle_examples",
    "span_text", "squad_dataset", "validate_settings", "window_p_mask", "write_features",
]
