"""Dynamic masking: ALBERT pretraining instances made and masked on the fly in tf.data.

The offline `create_pretraining_data` (`albert_tf.data.pretraining`) writes each
document `dupe_factor` times with different masks. Here the same instances are drawn
inside the input pipeline instead, with the same distribution, so a long run sees new
sentence pairs and new masks at every pass over the corpus and needs no dupe pass:

    text (one sentence a line, blank lines between documents) or tokenized shards
      -> documents (ragged [num_sentences, (T)], read in blocks: never the whole corpus)
      -> sentence-order pairs `[CLS] A [SEP] B [SEP]`  (`sop_instances_from_documents`)
      -> shuffled, batched
      -> masked-LM targets                              (`DynamicMasker`)
      -> the original pretraining features, int32 (`masked_lm_weights` float32)

Everything is TensorFlow ops (no `tf.py_function`), so every stage runs in parallel
`Dataset.map` calls. Every random choice is a stateless op whose seed comes from
`tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`: one `seed` fixes the
whole stream, and each pass draws new pairs and masks.

What is drawn is what the original google-research/albert `create_pretraining_data.py`
draws (facts in `albert_tf.data.masking` and `albert_tf.data.pretraining`); the order in
which the random numbers are consumed differs, which changes no distribution:

- The greedy span choice visits the words in a uniformly random order with an n-gram
  length drawn for each visit: both are drawn for all words up front (a random key per
  word, argsorted; a length per word) and the greedy loop runs on them.
- 80/10/10 replacement: one uniform per chosen piece.
- Front/back truncation: each removed token is a fair coin, so the number removed from
  the front of a segment is Binomial(removed, 1/2), drawn once.
- The "random other document" a one-sentence chunk (or NSP with `random_next_sentence`)
  takes its B segment from is the document before it in the shuffled document stream
  (within each group of `documents_per_call` documents, the first taking the last; the
  original draws one from the whole corpus, the offline helper from its chunk). A group
  of a single document pairs it with itself.
- Each input file starts a new document (as the offline helper).

The modules follow the stream:

    documents  text (tokenized in the graph) or tokenized shards -> documents
    pairs      documents -> `[CLS] A [SEP] B [SEP]` instances (`sop_instances_from_documents`)
    masker     instances -> masked-LM targets (`DynamicMasker`)
    pipeline   the tf.data stream (`dynamic_pretraining_dataset`, `StreamOptions`)
    graph      stateless seeds and graph functions the stages share
"""

from albert_tf.data.dynamic_masking.documents import (
    SENTENCE_LENGTHS,
    TOKEN_IDS,
    check_text,
    text_documents,
    tokenized_documents,
    write_tokenized_documents,
)
from albert_tf.data.dynamic_masking.masker import DynamicMasker
from albert_tf.data.dynamic_masking.pairs import (
    sop_instances_from_document,
    sop_instances_from_documents,
)
from albert_tf.data.dynamic_masking.pipeline import (
    INPUT_FORMATS,
    StreamOptions,
    dynamic_pretraining_dataset,
)

__all__ = [
    "INPUT_FORMATS", "SENTENCE_LENGTHS", "TOKEN_IDS", "DynamicMasker", "StreamOptions",
    "check_text", "dynamic_pretraining_dataset", "sop_instances_from_document",
    "sop_instances_from_documents", "text_documents", "tokenized_documents",
    "write_tokenized_documents",
]
