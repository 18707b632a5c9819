"""Raw text -> model inputs inside a SavedModel: the `serve_text` half of each serving
kind (`albert_tf.export.kinds` names which of these a kind uses).

Each kind's text side is two functions of `TextSettings`:

- `*_specs(settings)`: the string inputs of `serve_text` (their names are the
  signature's argument names);
- `pack_*(tokenizer, settings, texts)`: the named string tensors -> `PackedText`: the
  model inputs (packed as the kind's records are, with `albert_tf.packing`) and what
  `serve_text` returns besides the model's outputs.

`tokenizer` is an `albert_tf.text.AlbertTextTokenizer`; nothing here imports it, so the
table of kinds stays importable without tensorflow-text.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf import names, packing


@dataclasses.dataclass(frozen=True)
class TextSettings:
    """How `serve_text` packs: fixed when the export is traced."""

    max_seq_length: int
    is_pair: bool = True             # sentence kinds: text_a and text_b, or text_a alone
    max_query_length: int = 64       # SQuAD: the question's first pieces
    max_qa_length: int = 128         # multiple choice: the option's last pieces
    num_choices: int | None = None   # multiple choice: text_b is [B, num_choices]


@dataclasses.dataclass(frozen=True)
class PackedText:
    """`inputs`: the model inputs (a kind's model takes those it names); `returned`:
    tensors that `serve_text` returns beside the model's outputs."""

    inputs: dict
    returned: dict = dataclasses.field(default_factory=dict)


def _string_spec(name: str, shape=(None,)) -> tf.TensorSpec:
    return tf.TensorSpec(list(shape), tf.string, name=name)


def _pack(tokenizer, settings: TextSettings, segments) -> dict:
    return packing.pack_inputs(segments, settings.max_seq_length, cls_id=tokenizer.cls_id,
                               sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)


# ---------------------------------------------------- one text or a pair (GLUE-like)
def sentence_specs(settings: TextSettings) -> list[tf.TensorSpec]:
    """`text_a` [B], and `text_b` [B] for pair tasks."""
    specs = [_string_spec(names.TEXT_A)]
    if settings.is_pair:
        specs.append(_string_spec(names.TEXT_B))
    return specs


def pack_sentences(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`[CLS] A [SEP] (B [SEP])`, cut as the classifier records (longest-first)."""
    return PackedText(_pack(tokenizer, settings, [tokenizer.tokenize(t)
                                                  for t in texts.values()]))


def pack_sentences_for_mlm(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`pack_sentences`, with the MLM head read at every position: raw text cannot
    carry the [MASK] id, so the caller picks the positions it needs from `mlm_logits`
    [B, S, V] (and gets the packed ids and mask to find them)."""
    inputs = pack_sentences(tokenizer, settings, texts).inputs
    word_ids = inputs[names.INPUT_WORD_IDS]  # [B, S]
    batch, length = tf.shape(word_ids)[0], tf.shape(word_ids)[1]
    inputs[names.MASKED_LM_POSITIONS] = tf.tile(tf.range(length)[None], [batch, 1])
    return PackedText(inputs, {names.INPUT_WORD_IDS: word_ids,
                               names.INPUT_MASK: inputs[names.INPUT_MASK]})


# ------------------------------------------------------------ multiple choice (RACE)
def choice_specs(settings: TextSettings) -> list[tf.TensorSpec]:
    """`text_a` [B] (the article) and `text_b` [B, num_choices] (question + option)."""
    return [_string_spec(names.TEXT_A), _string_spec(names.TEXT_B, (None, settings.num_choices))]


def pack_choices(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`[CLS] article [SEP] question-with-option [SEP]` per choice, as the RACE records
    (`albert_tf.data.race.convert_single_example`): the option keeps its LAST
    `max_qa_length` pieces, the article its first pieces that still fit."""
    choices = settings.num_choices
    articles, options = texts[names.TEXT_A], texts[names.TEXT_B]
    batch = tf.shape(articles)[0]
    article = tokenizer.tokenize(articles)  # [B, (T)], each article tokenized once
    article = tf.gather(article, tf.repeat(tf.range(batch), choices))  # [B * C, (T)]
    option = tokenizer.tokenize(tf.reshape(options, [-1]))  # [B * C, (T)]
    article_length, option_length = packing.choice_lengths(
        article.row_lengths(), option.row_lengths(), settings.max_seq_length,
        settings.max_qa_length)
    # The pair now fits in max_seq_length - 3: pack_inputs cuts nothing more.
    packed = _pack(tokenizer, settings, [packing.take_first(article, article_length),
                                         packing.take_last(option, option_length)])
    # [B * C, S] -> [B, C, S]
    return PackedText({name: tf.reshape(value, [batch, choices, -1])
                       for name, value in packed.items()})


# ------------------------------------------------------------------------ SQuAD
def squad_specs(settings: TextSettings) -> list[tf.TensorSpec]:
    """`question` [B] and `context` [B]."""
    return [_string_spec(names.QUESTION), _string_spec(names.CONTEXT)]


def pack_squad(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`[CLS] question [SEP] context [SEP]` as one window of the SQuAD records (no doc
    stride): the question's first `max_query_length` pieces, the context's first pieces
    that fit. Returns, besides the outputs: the packed inputs with `p_mask` (0 on [CLS]
    and the context pieces, 1 elsewhere, as the original), `context_start` [B] (the
    position of the first context piece) and `token_start_char` / `token_end_char`
    [B, S]: `context[start:end]` is the raw text of the piece at each position, -1 off
    the context (code points, as Python indexes a str)."""
    question = tokenizer.tokenize(texts[names.QUESTION])  # [B, (Q)]
    context, starts, ends = tokenizer.tokenize_with_offsets(texts[names.CONTEXT])  # [B, (T)]
    question_length, context_length = packing.query_context_lengths(
        question.row_lengths(), context.row_lengths(), settings.max_seq_length,
        settings.max_query_length)
    # The pair now fits in max_seq_length - 3: pack_inputs cuts nothing more.
    inputs = _pack(tokenizer, settings, [packing.take_first(question, question_length),
                                         packing.take_first(context, context_length)])
    length = tf.shape(inputs[names.INPUT_WORD_IDS])[1]
    positions = tf.range(length, dtype=tf.int64)[None, :]  # [1, S]
    start = (question_length + 2)[:, None]  # [B, 1]: after [CLS] question [SEP]
    in_context = (positions >= start) & (positions < start + context_length[:, None])
    is_answer = (positions == 0) | in_context
    inputs[names.P_MASK] = 1.0 - tf.cast(is_answer, tf.float32)
    returned = dict(inputs)
    returned[names.CONTEXT_START] = tf.cast(question_length + 2, tf.int32)
    # Each context piece's code points in `context`, placed at its input position.
    index = tf.maximum(positions - start, 0)  # [B, S]
    for name, offsets in ((names.TOKEN_START_CHAR, starts), (names.TOKEN_END_CHAR, ends)):
        table = tf.pad(offsets.to_tensor(), [[0, 0], [0, 1]])  # [B, T + 1]
        index_in_row = tf.minimum(index, tf.shape(table, out_type=tf.int64)[1] - 1)
        values = tf.gather(table, index_in_row, batch_dims=1)  # [B, S]
        returned[name] = tf.where(in_context, values, -1)
    return PackedText(inputs, returned)
