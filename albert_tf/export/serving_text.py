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
    num_choices: int | None = None   # multiple choice: at most this many choices
    word_split: str = "whitespace"   # token classification: `data.ner.WORD_SPLITS`
    # sentence and multiple-choice kinds: a text (a context) longer than max_seq_length
    # cut, or read in windows of it every window_stride pieces (None: half the window),
    # as `--long_text` reads it
    long_text: str = packing.TRUNCATE
    window_stride: int | None = None


@dataclasses.dataclass(frozen=True)
class PackedText:
    """`inputs`: the model inputs (a kind's model takes those it names); `returned`:
    tensors that `serve_text` returns beside the model's outputs; `text_model`: what a
    Keras text model (`albert_tf.text_models`) reads beside the model inputs (token
    classification's `word_positions`), which `serve_text` does not return;
    `window_splits`: where the inputs are the windows of the texts (int [B + 1]: text
    b's are rows `window_splits[b]` to `window_splits[b + 1]`), whose outputs
    `serve_text` pools into one row per text (the kind's `window_pooling`)."""

    inputs: dict
    returned: dict = dataclasses.field(default_factory=dict)
    text_model: dict = dataclasses.field(default_factory=dict)
    window_splits: tf.Tensor | None = None


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
    """`[CLS] A [SEP] (B [SEP])`, cut as the classifier records (longest-first); with
    `long_text="windows"`, every window of each text as the windows' records are made
    (`packing.pack_windows_tf`), their outputs pooled by `serve_text`."""
    segments = [tokenizer.tokenize(t) for t in texts.values()]
    if settings.long_text == packing.WINDOWS:
        inputs, splits = packing.pack_windows_tf(
            segments, tokenizer.word_starts, settings.max_seq_length,
            stride=settings.window_stride, cls_id=tokenizer.cls_id,
            sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)
        return PackedText(inputs, window_splits=splits)
    return PackedText(_pack(tokenizer, settings, segments))


def pack_sentences_for_mlm(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`pack_sentences`, with the MLM head read at every position: raw text cannot
    carry the [MASK] id, so the caller picks the positions it needs from `mlm_logits`
    [B, S, V] (and gets the packed ids and mask to find them)."""
    return mlm_at_every_position(pack_sentences(tokenizer, settings, texts))


def mlm_at_every_position(packed: PackedText) -> PackedText:
    """Packed sentences -> the same, with `masked_lm_positions` every position and the
    packed ids and mask returned."""
    inputs = dict(packed.inputs)
    word_ids = inputs[names.INPUT_WORD_IDS]  # [B, S]
    batch, length = tf.shape(word_ids)[0], tf.shape(word_ids)[1]
    inputs[names.MASKED_LM_POSITIONS] = tf.tile(tf.range(length)[None], [batch, 1])
    return PackedText(inputs, {names.INPUT_WORD_IDS: word_ids,
                               names.INPUT_MASK: inputs[names.INPUT_MASK]})


# ------------------------------------------------ multiple choice (RACE, C3, SWAG, ...)
def choice_specs(settings: TextSettings) -> list[tf.TensorSpec]:
    """`context` [B], `question` [B] and `choices` [B, N] (N at most num_choices; an
    empty string is no choice, for rows with fewer)."""
    return [_string_spec(names.CONTEXT), _string_spec(names.QUESTION),
            _string_spec(names.CHOICES, (None, None))]


def make_endings(questions, options):
    """`data.choice_records.make_ending` in the graph: each option in place of every `_` of its
    question, else question + " " + option. questions, options: [R] strings."""
    parts = tf.strings.split(questions, "_")  # [R, (k)]: k - 1 blanks
    blank = parts.row_lengths() > 1
    # p0 o p1 o ... o pk: every part followed by the option, the last one's dropped.
    flat_options = tf.gather(options, parts.value_rowids())
    pairs = tf.reshape(tf.stack([parts.flat_values, flat_options], axis=1), [-1])
    pairs = tf.RaggedTensor.from_row_lengths(pairs, 2 * parts.row_lengths())
    keep = tf.ragged.range(pairs.row_lengths()) < pairs.row_lengths()[:, None] - 1
    filled = tf.strings.reduce_join(tf.ragged.boolean_mask(pairs, keep), axis=1)
    return tf.where(blank, filled, tf.strings.join([questions, options], separator=" "))


def pack_choices(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`[CLS] context [SEP] ending [SEP]` per choice, as the multiple-choice records
    (`albert_tf.data.choice_records.convert_single_example`): the ending (`make_endings`) keeps
    its LAST `max_qa_length` pieces, the context its first pieces that still fit. Rows
    with fewer than num_choices choices (or "" choices) get absent choices: all zeros,
    which the model never predicts. More choices than num_choices fail the request.
    With `long_text="windows"`, every window of each context beside all its choices,
    as the windows' records are made (`choice_windows`), their outputs pooled by
    `serve_text`."""
    choices = settings.num_choices
    contexts, questions = texts[names.CONTEXT], texts[names.QUESTION]
    options = texts[names.CHOICES]  # [B, N]
    too_many = tf.debugging.assert_less_equal(
        tf.shape(options)[1], choices,
        message=f"at most {choices} choices per question (the export's num_choices)")
    with tf.control_dependencies([too_many]):  # before the padding below fails on them
        options = tf.identity(options)
    options = tf.pad(options, [[0, 0], [0, choices - tf.shape(options)[1]]])  # [B, C]
    batch = tf.shape(contexts)[0]
    present = tf.reshape(tf.not_equal(options, ""), [-1])  # [B * C]
    context = tokenizer.tokenize(contexts)  # [B, (T)], each context tokenized once
    endings = make_endings(tf.repeat(questions, choices), tf.reshape(options, [-1]))
    option = tokenizer.tokenize(endings)  # [B * C, (T)]
    if settings.long_text == packing.WINDOWS:
        return choice_windows(tokenizer, settings, context, option, present)
    context = tf.gather(context, tf.repeat(tf.range(batch), choices))  # [B * C, (T)]
    context_length, option_length = packing.choice_lengths(
        context.row_lengths(), option.row_lengths(), settings.max_seq_length,
        settings.max_qa_length)
    # The pair now fits in max_seq_length - 3: pack_inputs cuts nothing more.
    packed = _pack(tokenizer, settings, [packing.take_first(context, context_length),
                                         packing.take_last(option, option_length)])
    # Absent choices: all zeros. [B * C, S] -> [B, C, S]
    return PackedText({name: tf.reshape(value * tf.cast(present, value.dtype)[:, None],
                                        [batch, choices, -1])
                       for name, value in packed.items()})


def choice_windows(tokenizer, settings: TextSettings, context, option, present
                   ) -> PackedText:
    """`pack_choices` with windows over the context, in TensorFlow ops, as
    `albert_tf.data.choice_records.convert_example_windows` makes them: context ids
    [B, (T)], each question's endings' ids [B * C, (T)] and whether each is a choice
    (bool [B * C]) -> the inputs [W, C, S] of the W windows of all the contexts,
    `window_splits` [B + 1] their questions'. The windows' length is
    `packing.choice_window` of the question's longest ending (its choices'), where
    they lie `packing.batch_window_spans` (word starts: the tokenizer's)."""
    choices, length = settings.num_choices, settings.max_seq_length
    option_length = packing.choice_lengths(
        0, tf.cast(option.row_lengths(), tf.int32), length, settings.max_qa_length)[1]
    longest = tf.reduce_max(tf.reshape(option_length * tf.cast(present, tf.int32),
                                       [-1, choices]), axis=1)  # [B]
    window = packing.choice_window(longest, length, settings.max_qa_length)
    starts, sizes = packing.batch_window_spans(tokenizer.word_starts(context), window,
                                               settings.window_stride)  # [B, (K)] each
    windows = tf.size(starts.values)
    # a row per window and choice: [W * C]
    row = tf.repeat(tf.cast(starts.value_rowids(), tf.int32), choices)  # its question
    ending = row * choices + tf.tile(tf.range(choices), [windows])  # its ending's row
    first = tf.gather(tf.cast(context.row_splits[:-1], tf.int32), row) + tf.repeat(
        starts.values, choices)
    positions = tf.ragged.range(first, first + tf.repeat(sizes.values, choices))
    endings = packing.take_last(tf.gather(option, ending),
                                tf.gather(option_length, ending))
    packed = packing.pack_dense(
        [(tf.gather(context.values, positions.values), positions.row_splits),
         (endings.values, endings.row_splits)], length, cls_id=tokenizer.cls_id,
        sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)
    present = tf.gather(present, ending)
    # Absent choices: all zeros. [W * C, S] -> [W, C, S]
    return PackedText({name: tf.reshape(value * tf.cast(present, value.dtype)[:, None],
                                        [windows, choices, -1])
                       for name, value in packed.items()},
                      window_splits=starts.row_splits)


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


# ------------------------------------------------------- token classification (NER)
def word_specs(settings: TextSettings) -> list[tf.TensorSpec]:
    """`text` [B]: raw text, split into words in the graph (`settings.word_split`)."""
    return [_string_spec(names.TEXT)]


def split_words(texts, word_split: str):
    """The graph's `data.ner.split_words`: [B] strings -> words [B, (W)] with the
    code points [start, end) of each in its text (int32 [B, (W)]). "whitespace": runs
    of non-space characters, each CJK character a word of its own; "characters":
    every non-space character a word."""
    from albert_tf.text import _valid_utf8
    from albert_tf.text.unicode_classes import character_classes

    c = character_classes()
    chars = tf.strings.unicode_split(_valid_utf8(texts), "UTF-8")  # [B, (C)]
    flat = chars.flat_values
    positions = tf.ragged.range(chars.row_lengths()).flat_values  # [F]
    row_first = tf.equal(positions, 0)
    space = tf.strings.regex_full_match(flat, c["space"])

    def previous(flags, first_value):  # the flag of the character before, in its row
        shifted = tf.concat([[first_value], flags[:-1]], axis=0)[:tf.size(flags)]
        return tf.where(row_first, first_value, shifted)

    if word_split == "characters":
        starts_word = tf.logical_not(space)
    else:
        cjk = tf.strings.regex_full_match(flat, c["cjk"])
        starts_word = tf.logical_not(space) & (
            previous(space, True) | cjk | previous(cjk, False))
    word_of = tf.cumsum(tf.cast(starts_word, tf.int64)) - 1  # [F], over the batch
    count = tf.reduce_sum(tf.cast(starts_word, tf.int64))
    keep = tf.logical_not(space)
    kept_words = tf.boolean_mask(word_of, keep)
    kept_positions = tf.boolean_mask(positions, keep)
    words = tf.strings.unsorted_segment_join(tf.boolean_mask(flat, keep), kept_words, count)
    starts = tf.math.unsorted_segment_min(kept_positions, kept_words, count)
    ends = tf.math.unsorted_segment_max(kept_positions, kept_words, count) + 1
    per_row = tf.math.unsorted_segment_sum(tf.cast(starts_word, tf.int64),
                                           chars.value_rowids(), chars.nrows())

    def rows(values):
        return tf.RaggedTensor.from_row_lengths(values, per_row)
    return rows(words), rows(tf.cast(starts, tf.int32)), rows(tf.cast(ends, tf.int32))


def pack_words(tokenizer, settings: TextSettings, texts: dict) -> PackedText:
    """`[CLS] pieces [SEP]` as the NER features (`data.ner.sentence_features`): each
    word tokenized on its own, the first `max_seq_length - 2` pieces kept (one window).
    Returns, besides the outputs, `input_mask`, `word_start` [B, S] (int32 1 at the
    first piece of each word: the position whose prediction is the word's tag) and
    `token_start_char` / `token_end_char` [B, S] (the code points [start, end) of the
    piece's word in `text`, -1 at [CLS], [SEP] and padding). For a Keras text model,
    `word_positions` int32 [B, max_seq_length - 2]: the position of the first piece of
    each of the text's first max_seq_length - 2 words, -1 for a word with no piece kept
    (cut off, or no piece at all) and past the text's words."""
    words, starts, ends = split_words(texts[names.TEXT], settings.word_split)
    pieces = tokenizer.tokenize(words.flat_values)  # [W, (P)], W words of the batch
    per_word = pieces.row_lengths()
    per_row = tf.math.unsorted_segment_sum(per_word, words.value_rowids(), words.nrows())

    def by_row(flat_values):  # one value per piece of the batch -> [B, (T)]
        return tf.RaggedTensor.from_row_lengths(flat_values, per_row)

    def per_piece(values):  # [B, (W)] -> [B, (T)]: each piece gets its word's value
        return by_row(tf.repeat(values.flat_values, per_word))

    ids = by_row(pieces.flat_values)
    first = tf.cast(tf.ragged.range(per_word).flat_values == 0, tf.int32)
    inputs = _pack(tokenizer, settings, [ids])
    length = tf.shape(inputs[names.INPUT_WORD_IDS])[1]
    kept = packing.single_length(ids.row_lengths(), settings.max_seq_length)

    def positions(values):  # [B, (T)] -> [B, S]: after [CLS], -1 off the kept pieces
        values = packing.take_first(values, kept).to_tensor(default_value=-1)
        values = tf.pad(values, [[0, 0], [1, 0]], constant_values=-1)[:, :length]
        return tf.pad(values, [[0, 0], [0, length - tf.shape(values)[1]]],
                      constant_values=-1)

    returned = {
        names.INPUT_MASK: inputs[names.INPUT_MASK],
        names.WORD_START: tf.maximum(positions(by_row(first)), 0),
        names.TOKEN_START_CHAR: positions(per_piece(starts)),
        names.TOKEN_END_CHAR: positions(per_piece(ends)),
    }
    # Each word's first piece: after [CLS] and the pieces of the words before it.
    row_of_word = words.value_rowids()
    before = tf.cumsum(per_word, exclusive=True) - tf.gather(
        tf.cumsum(per_row, exclusive=True), row_of_word)
    first_position = tf.where((per_word > 0) & (before < tf.gather(kept, row_of_word)),
                              before + 1, -1)
    word_positions = words.with_flat_values(tf.cast(first_position, tf.int32)).to_tensor(
        default_value=-1, shape=[None, packing.segment_budget(settings.max_seq_length, 1)])
    return PackedText(inputs, returned, {names.WORD_POSITIONS: word_positions})

