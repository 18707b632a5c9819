"""The dynamic pretraining stream: files -> documents -> pairs -> masked batches."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from albert_tf import names
from albert_tf.data.dynamic_masking.documents import (
    check_corpus,
    text_documents,
    tokenized_documents,
)
from albert_tf.data.dynamic_masking.graph import sub_seed
from albert_tf.data.dynamic_masking.masker import DynamicMasker, tokenizer_pair
from albert_tf.data.dynamic_masking.pairs import sop_instances_from_documents
from albert_tf.data.graph import graph_function
from albert_tf.data.pretraining import (
    FEATURE_NAMES,
    PretrainingDataConfig,
    PretrainingDataError,
    expand_input_patterns,
)

INPUT_FORMATS = ("text", "tokenized")

# The purposes of the pipeline's independent seeds (`graph.sub_seed`).
_FILES, _DOCUMENTS, _PAIRS, _INSTANCES, _MASKS = range(5)


@dataclasses.dataclass(frozen=True)
class StreamOptions:
    """How the corpus is read and the instances batched (what is drawn is the
    `PretrainingDataConfig`'s).

    Attributes:
      input_format: "text" (the original format) or "tokenized" (shards of
        `write_tokenized_documents`).
      repeat: pass over the corpus forever (training); otherwise once per iteration of
        the dataset (each iteration a new pass, with new draws).
      pad_to_max_length: pad to `max_seq_length`; otherwise to each batch's longest.
      drop_remainder: every batch has `batch_size` instances.
      document_shuffle_buffer, instance_shuffle_buffer: shuffle windows (documents
        before pairing; instances before batching, as the original shuffles its
        instances).
      cycle_length: files read at once.
      documents_per_call: documents made into instances by one (vectorized) call.
      max_skipped_rows: text input: the most lines that may be skipped as unreadable
        (not UTF-8, a NUL byte), a fraction or a count (`albert_tf.data.report`;
        default 1%), checked when the dataset is made.
    """
    input_format: str = "text"
    repeat: bool = True
    pad_to_max_length: bool = True
    drop_remainder: bool = False
    document_shuffle_buffer: int = 1000
    instance_shuffle_buffer: int = 10_000
    cycle_length: int = 4
    documents_per_call: int = 64
    max_skipped_rows: str | None = None


_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(PretrainingDataConfig))
_STREAM_FIELDS = frozenset(f.name for f in dataclasses.fields(StreamOptions))


def _settings(config, stream, overrides) -> tuple[PretrainingDataConfig, StreamOptions]:
    """`config` and `stream` (defaults when None) with the fields named in `overrides`
    replaced; an unknown name is an error, as a misspelt keyword argument."""
    unknown = set(overrides) - _CONFIG_FIELDS - _STREAM_FIELDS
    if unknown:
        raise TypeError("dynamic_pretraining_dataset() got unexpected keyword arguments "
                        f"{sorted(unknown)} (expected fields of PretrainingDataConfig "
                        "or StreamOptions)")
    config = dataclasses.replace(config or PretrainingDataConfig(), **{
        k: v for k, v in overrides.items() if k in _CONFIG_FIELDS})
    stream = dataclasses.replace(stream or StreamOptions(), **{
        k: v for k, v in overrides.items() if k in _STREAM_FIELDS})
    return config, stream


def dynamic_pretraining_dataset(
        input_files: str | Sequence[str], tokenizer, batch_size: int,
        config: PretrainingDataConfig | None = None, *, seed: int | None = None,
        stream: StreamOptions | None = None, **overrides) -> tf.data.Dataset:
    """Batches of pretraining features drawn on the fly from a corpus.

    The batches carry the original record features (`albert_tf.data.pretraining`:
    `input_ids`, `input_mask`, `segment_ids`, `token_boundary` [B, S];
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [B,
    max_predictions_per_seq]; `next_sentence_labels` [B, 1]; int32 but the float32
    weights), as `pretraining.pretraining_dataset` gives them from offline records;
    `records.to_model_inputs` renames them for the model.

    Args:
      input_files: paths or globs (comma-separated in a string): text in the original
        format, or tokenized shards (`write_tokenized_documents`) with
        `input_format="tokenized"`.
      tokenizer: a `FullTokenizer` or an `AlbertTextTokenizer` (text is tokenized in the
        graph; shards need it for the special ids and the word starts).
      config: the original flags (`max_seq_length` ... `random_next_sentence`; the
        chunking and `dupe_factor` play no part here).
      seed: fixes the whole stream (files, documents and instances shuffled, pairs,
        masks); each pass over the corpus draws new pairs and masks. Default:
        `config.random_seed`.
      stream: how the corpus is read and batched.
      **overrides: fields of `config` or `stream` by name (`max_seq_length=128`,
        `repeat=False`), over those given.

    Raises:
      PretrainingDataError: bad settings, no matching file, an empty corpus, or shards
        without the tokenized features.
    """
    config, stream = _settings(config, stream, overrides)
    seed = config.random_seed if seed is None else seed
    config.validate()
    if stream.input_format not in INPUT_FORMATS:
        raise PretrainingDataError(
            f"input_format must be one of {INPUT_FORMATS}, got {stream.input_format!r}")
    if batch_size < 1:
        raise PretrainingDataError(f"batch_size must be at least 1, got {batch_size}")
    files = expand_input_patterns(input_files)
    check_corpus(files, stream.input_format, stream.max_skipped_rows)
    python, graph_tokenizer = tokenizer_pair(tokenizer)
    masker = DynamicMasker.from_config(python, config)
    documents = _documents(files, graph_tokenizer, stream, seed)
    instances = _instances(documents, masker, config, stream, seed)
    batches = instances.batch(batch_size, drop_remainder=stream.drop_remainder)
    return _masked(batches, masker, stream, seed).prefetch(tf.data.AUTOTUNE)


def _random_seeds(seed: int, purpose: int) -> tf.data.Dataset:
    """Stateless seeds, one [2] pair per element; new ones at every iteration."""
    return tf.data.Dataset.random(seed=sub_seed(seed, purpose),
                                  rerandomize_each_iteration=True).batch(2)


def _documents(files: list[str], tokenizer, stream: StreamOptions, seed: int
               ) -> tf.data.Dataset:
    """The corpus's documents, files and documents shuffled, in batches of
    `documents_per_call`: ragged [D, (N), (T)]."""
    def read(path):
        if stream.input_format == "text":
            return text_documents(path, tokenizer)
        return tokenized_documents(path)

    paths = tf.data.Dataset.from_tensor_slices(files).shuffle(
        len(files), seed=sub_seed(seed, _FILES), reshuffle_each_iteration=True)
    if stream.repeat:
        paths = paths.repeat()
    documents = paths.interleave(
        graph_function(read), cycle_length=min(stream.cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    documents = documents.shuffle(stream.document_shuffle_buffer,
                                  seed=sub_seed(seed, _DOCUMENTS),
                                  reshuffle_each_iteration=True)
    # Documents are paired in batches; in a batch each document's "random other
    # document" is the one before it (the shuffle made it a random one).
    return documents.ragged_batch(stream.documents_per_call)


def _instances(documents: tf.data.Dataset, masker: DynamicMasker,
               config: PretrainingDataConfig, stream: StreamOptions, seed: int
               ) -> tf.data.Dataset:
    """Unmasked `[CLS] A [SEP] B [SEP]` instances, padded to `max_seq_length`, shuffled."""
    max_seq_length = config.max_seq_length

    def make_instances(batch, seed_pair):
        instances = sop_instances_from_documents(
            batch, seed_pair, max_seq_length=max_seq_length, cls_id=masker.cls_id,
            sep_id=masker.sep_id, short_seq_prob=config.short_seq_prob,
            random_next_sentence=config.random_next_sentence)
        # Padded here, in one op per batch of documents, so that the instances are
        # plain [max_seq_length] rows for the shuffle and batch that follow.
        shape = [None, max_seq_length]
        input_ids = instances[names.INPUT_IDS]
        return {
            names.INPUT_IDS: input_ids.to_tensor(shape=shape),  # [I, L]
            names.SEGMENT_IDS: instances[names.SEGMENT_IDS].to_tensor(shape=shape),
            names.INPUT_MASK: tf.ones_like(input_ids).to_tensor(shape=shape),
            names.NEXT_SENTENCE_LABELS: instances[names.NEXT_SENTENCE_LABELS],  # [I]
        }

    instances = tf.data.Dataset.zip((documents, _random_seeds(seed, _PAIRS))).map(
        graph_function(make_instances), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    return instances.shuffle(stream.instance_shuffle_buffer,
                             seed=sub_seed(seed, _INSTANCES), reshuffle_each_iteration=True)


def _masked(batches: tf.data.Dataset, masker: DynamicMasker, stream: StreamOptions,
            seed: int) -> tf.data.Dataset:
    """The batches masked: the original features, in the original's order."""
    def mask(batch, seed_pair):
        if not stream.pad_to_max_length:  # cut to the batch's longest
            length = tf.reduce_max(tf.reduce_sum(batch[names.INPUT_MASK], axis=1))
            batch = {k: v[:, :length] if v.shape.rank == 2 else v for k, v in batch.items()}
        features = masker(batch[names.INPUT_IDS], batch[names.SEGMENT_IDS], seed_pair,
                          input_mask=batch[names.INPUT_MASK],
                          next_sentence_labels=batch[names.NEXT_SENTENCE_LABELS])
        return {name: features[name] for name in FEATURE_NAMES}

    return tf.data.Dataset.zip((batches, _random_seeds(seed, _MASKS))).map(
        graph_function(mask), num_parallel_calls=tf.data.AUTOTUNE)
