"""Raw text -> a model's inputs, as a Keras layer (keras-hub's preprocessors' place).

`TextPreprocessor` holds a release's tokenizer (`albert_tf.text.AlbertTextTokenizer`:
SentencePiece or WordPiece, the original's rules, in the graph) and packs what it
tokenizes as the records are packed, with the SavedModel's `serve_text` functions
(`albert_tf.export.serving_text`): one definition of text -> ids for the records'
Python path (tested equal), the SavedModel and the Keras models. Each batch is padded to
its longest packed text, at most `sequence_length`, as the scripts batch their records.

Its tokenizer file travels in a `.keras` file as an asset (`save_assets` /
`load_assets`), not as a path: a model saved on one machine loads on another.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from albert_tf import fileio, names, packing
from albert_tf.errors import UserError
from albert_tf.export import serving_text
from albert_tf.modeling import common

SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"


class TextInputError(UserError):
    """Text a text model cannot read (not strings, an empty text, one text where the
    model reads pairs, a label outside its classes): one line, before any step."""


_held_files = None  # a folder of this process for the tokenizer files loaded from assets


def _held_folder() -> str:
    global _held_files
    if _held_files is None:
        _held_files = tempfile.mkdtemp(prefix="albert_tf_vocabulary_")
        atexit.register(shutil.rmtree, _held_files, ignore_errors=True)
    return _held_files


def _hold(data: bytes, name: str) -> str:
    """`data` as a file of this process (the tokenizer reads, and a SavedModel export
    copies, a file): a folder of its own, so that two models' files never meet."""
    folder = tempfile.mkdtemp(dir=_held_folder())
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


class TextPreprocessor(keras.layers.Layer):
    """Raw strings -> the model inputs of a serving kind (`kind`: "classifier",
    "multi_label", ...: `albert_tf.tasks.serving_kinds()`), packed by the kind's
    `pack_text`, as its `serve_text` packs them.

    Made from a release directory (`from_release`) or a tokenizer file
    (`spm_model_file` or `vocab_file`, `do_lower_case`). `sequence_length`: the
    longest packed text (`--max_seq_length`); longer texts are cut as the records cut
    them. `text_settings`: the kind's other `serving_text.TextSettings` fields
    (`num_choices`, `max_qa_length`, ...). For the sentence kinds, one string tensor
    [B] packs `[CLS] a [SEP]`, a pair (a tuple of two [B] tensors, or a dict of
    `text_a` and `text_b`) `[CLS] a [SEP] b [SEP]`, cut longest-first; `pair` (None
    until the first call) is what it was made for or first called with, and a call of
    the other form is refused.

    `text_settings` `long_text="windows"` (the kinds with a `window_pooling`: the
    classifier, regression, multi-label and multiple choice) reads a longer text (a
    multiple-choice context) whole instead, in windows every `window_stride` pieces
    (None: half the window), as the records and `serve_text` read it
    (`packing.pack_windows_tf`, `serving_text.choice_windows`): the call returns the
    windows of the batch, one row each, and `names.WINDOW_SPLITS` (int64 [B + 1]: text
    b's are rows `window_splits[b]` to `window_splits[b + 1]`), by which the text model
    pools their outputs."""

    def __init__(self, *, kind: str = "classifier", spm_model_file=None, vocab_file=None,
                 do_lower_case: bool = True, sequence_length: int = 128,
                 pair: bool | None = None, text_settings: dict | None = None,
                 vocabulary: str | None = None, vocabulary_kind: str | None = None,
                 **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if spm_model_file and vocab_file:
            raise ValueError("give spm_model_file or vocab_file, not both")
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) \
                or sequence_length < 3:
            raise ValueError(f"sequence_length must be an integer of at least 3, got "
                             f"{sequence_length!r}")
        self.kind = kind
        self.serving_kind  # noqa: B018 (a kind of the registry, or a KeyError now)
        self.do_lower_case = bool(do_lower_case)
        self.sequence_length = sequence_length
        self.pair = pair
        self.text_settings = dict(text_settings or {})
        self.check_windows()
        path = spm_model_file or vocab_file
        self.vocabulary_kind = (SENTENCEPIECE if spm_model_file else WORDPIECE) if path \
            else vocabulary_kind
        self.vocabulary = os.path.basename(os.fspath(path)) if path else vocabulary
        self._file = None
        self.tokenizer = None
        if path:
            self._use(os.fspath(path))
        self.built = True  # no weights

    def _use(self, path: str) -> None:
        from albert_tf.text import AlbertTextTokenizer

        sentencepiece = self.vocabulary_kind == SENTENCEPIECE
        self.tokenizer = AlbertTextTokenizer(
            spm_model_file=path if sentencepiece else None,
            vocab_file=None if sentencepiece else path, do_lower_case=self.do_lower_case)
        self._file = path

    @classmethod
    def from_release(cls, directory, *, sequence_length: int = 128, **kwargs):
        """The preprocessor of a release directory (any layout the package reads): its
        SentencePiece model or WordPiece vocabulary, and its lowercasing."""
        from albert_tf.checkpoints import find_release_files

        files = find_release_files(directory)
        if not (files.spm_model_file or files.vocab_file):
            raise UserError(f"{directory} has no tokenizer file (a SentencePiece .model "
                            "or a WordPiece vocab*.txt)")
        lower = True if files.do_lower_case is None else files.do_lower_case
        kwargs.setdefault("do_lower_case", lower)
        if files.spm_model_file:
            return cls(spm_model_file=files.spm_model_file,
                       sequence_length=sequence_length, **kwargs)
        return cls(vocab_file=files.vocab_file, sequence_length=sequence_length, **kwargs)

    # ------------------------------------------------------------------ files
    @property
    def tokenizer_files(self) -> dict:
        """`spm_model_file` or `vocab_file` (a path readable now), for the exports."""
        self.check_loaded()
        key = "spm_model_file" if self.vocabulary_kind == SENTENCEPIECE else "vocab_file"
        return {key: self._file}

    def save_assets(self, dir_path):
        self.check_loaded()
        with open(os.path.join(dir_path, self.vocabulary), "wb") as f:
            f.write(fileio.read_bytes(self._file))

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, self.vocabulary or "")
        if not (self.vocabulary and os.path.isfile(path)):
            raise TextInputError(f"the model's file has no vocabulary asset "
                                 f"{self.vocabulary!r}: save it again from the model")
        with open(path, "rb") as f:
            self._use(_hold(f.read(), self.vocabulary))

    def check_loaded(self) -> None:
        """`TextInputError` unless it has its tokenizer file."""
        if self.tokenizer is None:
            raise TextInputError(
                f"{self.name} has no vocabulary ({self.vocabulary or 'none named'}): a "
                ".keras file saved without its assets/, or a preprocessor made from a "
                "config alone; make it with from_release, or save the model again")

    # ------------------------------------------------------------------ text
    @property
    def serving_kind(self):
        from albert_tf.tasks import serving_kinds

        return serving_kinds()[self.kind]

    @property
    def sentences(self) -> bool:
        """Whether the kind reads one text or a pair (`serving_text.sentence_specs`)."""
        return self.serving_kind.text_specs is serving_text.sentence_specs

    def settings(self, pair: bool | None = None) -> serving_text.TextSettings:
        """How the kind's `pack_text` packs (`serving_text.TextSettings`)."""
        pair = self.pair if pair is None else pair
        return serving_text.TextSettings(max_seq_length=self.sequence_length,
                                         is_pair=bool(pair), **self.text_settings)

    def text_names(self, pair: bool | None = None) -> list[str]:
        """The names of the texts it reads, in order (the export's inputs)."""
        return [spec.name for spec in self.serving_kind.text_specs(self.settings(pair))]

    def texts(self, inputs) -> dict:
        """`inputs` (a tensor, a tuple of tensors in `text_names` order, or a dict of
        them) as the dict of named string tensors the kind packs; `pair` checked (one
        text or two: what the model was made for, or first called with)."""
        if isinstance(inputs, dict):
            given = list(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            given = None
        if self.sentences:
            count = len(inputs)
            if count not in (1, 2) or (given and given != self.text_names(count == 2)):
                raise TextInputError(
                    f"one text ({names.TEXT_A}) or a pair ({names.TEXT_A}, {names.TEXT_B}) "
                    f"per example, got {', '.join(given) if given else count}")
            self.check_pairing(count == 2)
        wanted = self.text_names()
        if given is None:
            inputs = dict(zip(wanted, inputs))
        if sorted(inputs) != sorted(wanted):
            raise TextInputError(f"{self.kind} reads {', '.join(wanted)}; got "
                                 f"{', '.join(sorted(map(str, inputs)))}")
        return {name: tf.convert_to_tensor(inputs[name], tf.string) for name in wanted}

    @property
    def long_text(self) -> str:
        """How a text longer than `sequence_length` is read (`packing.LONG_TEXT_MODES`)."""
        return self.text_settings.get("long_text", packing.TRUNCATE)

    @property
    def window_stride(self) -> int | None:
        return self.text_settings.get("window_stride")

    @property
    def windows(self) -> bool:
        return self.long_text == packing.WINDOWS

    def check_windows(self) -> None:
        """`TextInputError` unless `long_text` and `window_stride` can read the kind's
        texts: a mode of `packing.LONG_TEXT_MODES`, windows only for a kind that pools
        them, a stride only with windows, a positive integer smaller than the shortest
        window (`packing.smallest_window`: of a text, or of a pair once `pair` is
        known; of a multiple-choice context beside an ending of `max_qa_length`
        pieces), which must hold two pieces at least."""
        mode, stride = self.long_text, self.window_stride
        if mode not in packing.LONG_TEXT_MODES:
            raise TextInputError(f"long_text must be one of "
                                 f"{', '.join(packing.LONG_TEXT_MODES)}, got {mode!r}")
        if mode != packing.WINDOWS:
            if stride is not None:
                raise TextInputError(f"window_stride={stride!r} is for long_text=windows")
            return
        if self.serving_kind.window_pooling is None:
            raise TextInputError(f"a {self.kind} model reads no windows of a long text "
                                 "(long_text=windows is for the text classifier: "
                                 "classes, regression, multi-label; and multiple choice)")
        if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int)
                                   or stride < 1):
            raise TextInputError(f"window_stride must be a positive integer, got "
                                 f"{stride!r}")
        if self.serving_kind.per_choice:  # a context, beside the longest ending
            qa = self.text_settings["max_qa_length"]
            window = packing.smallest_window(self.sequence_length, True, qa)
            what = (f"sequence_length={self.sequence_length} and max_qa_length={qa} give "
                    f"a context windows of {window} piece(s) (beside the longest question "
                    "+ choice)")
            larger = "a larger sequence_length or a smaller max_qa_length"
        elif self.pair is None:
            return  # checked again when the first call says
        else:
            window = packing.smallest_window(self.sequence_length, self.pair)
            what = (f"sequence_length={self.sequence_length} gives "
                    f"{'a pair' if self.pair else 'a text'} windows of {window} piece(s)")
            larger = "a larger sequence_length"
        if window < 2:
            raise TextInputError(f"long_text=windows: {what}, too few to slide (two at "
                                 f"least): give {larger}")
        if stride is not None and stride >= window:
            raise TextInputError(f"window_stride={stride} must be smaller than the window: "
                                 f"{what}; give window_stride="
                                 f"{packing.default_window_stride(window)} (half the "
                                 f"window) or less, or {larger}")

    def check_pairing(self, pair: bool) -> None:
        if self.pair is None:
            self.pair = pair
            self.check_windows()
        elif self.pair != pair:
            raise TextInputError(
                "this model reads pairs of texts (text_a, text_b): give a tuple of two "
                "texts per example" if self.pair else
                "this model reads one text per example; it was given pairs")

    def call(self, inputs):
        """The model inputs of `inputs` (see `texts`): the kind's `pack_text` outputs
        that the model reads, and `names.WINDOW_SPLITS` where it reads windows."""
        self.check_loaded()
        texts = self.texts(inputs)
        return self._packer(self.settings())(texts)

    def _packer(self, settings: serving_text.TextSettings):
        """The kind's packing of named texts into the call's outputs, as one tf.function
        per tokenizer and settings, traced once for batches of any size: each
        `predict`, `evaluate` or `fit` maps a new dataset, whose function then calls
        it instead of tracing the tokenizer and the packing again (a tiny text model's
        `predict` of 9 texts: 0.06 s of CPU to make its dataset instead of 0.35, 0.35 s
        in all instead of 0.54; two alternating runs on a 2-core AMD EPYC)."""
        # (kept out of Keras' and tf.Module's attribute tracking: nothing to save)
        cache = self.__dict__.setdefault("_packers", {})
        key = (id(self.tokenizer), settings)
        if key not in cache:
            kind, tokenizer = self.serving_kind, self.tokenizer

            def pack(texts):
                packed = kind.pack_text(tokenizer, settings, texts)
                splits = {} if packed.window_splits is None else {
                    names.WINDOW_SPLITS: tf.cast(packed.window_splits, tf.int64)}
                return {**packed.inputs, **packed.text_model, **splits}

            cache.clear()  # another tokenizer (assets loaded) or other settings
            cache[key] = tf.function(pack, autograph=False, reduce_retracing=True)
        return cache[key]

    @property
    def words(self) -> bool:
        """Whether the kind reads words (token classification: `word_positions` too)."""
        return self.serving_kind.text_specs is serving_text.word_specs

    def compute_output_spec(self, inputs):
        shape = (None, None, None) if self.serving_kind.per_choice else (None, None)
        extra = (names.WORD_POSITIONS,) if self.words else ()
        spec = {name: keras.KerasTensor(shape, "int32")
                for name in names.MODEL_INPUTS + extra}
        if self.windows:
            spec[names.WINDOW_SPLITS] = keras.KerasTensor((None,), "int64")
        return spec

    def get_config(self):
        return {**super().get_config(), "kind": self.kind,
                "do_lower_case": self.do_lower_case,
                "sequence_length": self.sequence_length, "pair": self.pair,
                "text_settings": dict(self.text_settings),
                "vocabulary": self.vocabulary, "vocabulary_kind": self.vocabulary_kind}


common.serializable(TextPreprocessor)


# ---------------------------------------------------------------- checks in Python
def _strings(values, what: str, empty: bool = False) -> np.ndarray:
    """`values` (a list, a NumPy array or a tensor of strings) as a 1-D object array;
    `TextInputError` naming the first element that is not a string, or is empty
    (unless `empty`)."""
    if isinstance(values, (str, bytes)):
        values = [values]
    if isinstance(values, (tf.Tensor, tf.RaggedTensor)):
        if values.dtype != tf.string:
            raise TextInputError(f"{what} must be strings, got a {values.dtype.name} tensor")
        values = values.numpy()
    array = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) \
        else values
    if array.ndim != 1:
        raise TextInputError(f"{what} must be a flat list of strings (one per example; a "
                             f"pair is a tuple of two lists), got shape {array.shape}")
    for i, value in enumerate(array):
        if not isinstance(value, (str, bytes, np.str_, np.bytes_)):
            shown = value.item() if isinstance(value, np.generic) else value
            raise TextInputError(f"{what}[{i}] is {type(value).__name__} "
                                 f"{shown!r:.40}, not a string")
        if not empty and not value.strip():
            raise TextInputError(f"{what}[{i}] is an empty text")
    return array.astype(object)


def check_texts(x):
    """The texts of `fit`, `evaluate` or `predict` (a list or array of strings, or a
    tuple of two for pairs, or a dict of `text_a` and `text_b`) as a tuple of 1-D string arrays of
    one length; `TextInputError` for anything else."""
    if isinstance(x, dict):
        parts = [x[k] for k in (names.TEXT_A, names.TEXT_B) if k in x]
        if not parts or len(parts) != len(x):
            raise TextInputError(f"text inputs are {names.TEXT_A} and {names.TEXT_B}; got "
                                 f"{', '.join(sorted(map(str, x)))}")
    elif isinstance(x, tuple):  # a pair; a list is always one text per element
        parts = list(x)
    else:
        parts = [x]
    if x is None or any(p is None for p in parts):
        raise TextInputError("no texts given")
    if len(parts) not in (1, 2):
        raise TextInputError(f"a text or a pair of texts per example, got {len(parts)} "
                             "lists")
    arrays = [_strings(p, ("text_a", "text_b")[i] if len(parts) == 2 else "x")
              for i, p in enumerate(parts)]
    if len(arrays) == 2 and len(arrays[0]) != len(arrays[1]):
        raise TextInputError(f"text_a has {len(arrays[0])} texts and text_b "
                             f"{len(arrays[1])}")
    return tuple(arrays)


def check_choices(x, num_choices: int):
    """The texts of a multiple-choice `fit`, `evaluate` or `predict`: a dict of
    `context`, `question` and `choices`, or a tuple of the three; each example's
    choices a list of 1 to `num_choices` options. Returns (contexts, questions, choices
    [N, num_choices], fewer padded with "", as the SavedModel reads them);
    `TextInputError` for anything else."""
    keys = (names.CONTEXT, names.QUESTION, names.CHOICES)
    if isinstance(x, dict) and sorted(x) == sorted(keys):
        parts = [x[k] for k in keys]
    elif isinstance(x, tuple) and len(x) == 3:
        parts = list(x)
    else:
        raise TextInputError("multiple choice reads a dict of context, question and "
                             "choices (or a tuple of the three)")
    contexts = _strings(parts[0], names.CONTEXT)
    questions = _strings(parts[1], names.QUESTION, empty=True)
    rows = parts[2].tolist() if isinstance(parts[2], np.ndarray) else list(parts[2])
    if not (len(contexts) == len(questions) == len(rows)):
        raise TextInputError(f"{len(contexts)} contexts, {len(questions)} questions and "
                             f"{len(rows)} lists of choices")
    choices = np.full((len(rows), num_choices), "", dtype=object)
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or not 1 <= len(row) <= num_choices:
            raise TextInputError(
                f"choices[{i}] must be a list of 1 to num_choices={num_choices} options, "
                f"got {row!r:.60}")
        row = [v for v in row if not (isinstance(v, str) and not v)]  # "" is no choice
        options = _strings(row, f"choices[{i}]")
        choices[i, :len(options)] = options
    return contexts, questions, choices
