"""The character classes of the Python tokenizers' rules, as RE2 classes for the graph.

Python's whitespace, combining marks, control characters, punctuation and CJK
characters, built from Python's own `unicodedata`, so that the in-graph tokenizer
(`albert_tf.text`) makes the same decisions as the Python one (`albert_tf.tokenization`)
for every code point. Computing them takes seconds, so they are stored by Unicode
version in character_classes.json beside this module; `python -m albert_tf.text` adds
the running Python's.
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata

from albert_tf import fileio


def _ranges_class(predicate) -> str:
    """An RE2 character class of every code point for which `predicate(char)` holds."""
    ranges, start, previous = [], None, None
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in UTF-8 text
            continue
        if predicate(chr(cp)):
            if start is None:
                start = cp
            elif cp != previous + 1:
                ranges.append((start, previous))
                start = cp
            previous = cp
    if start is not None:
        ranges.append((start, previous))
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


# `computed_character_classes()` for the Unicode versions of the Pythons we run on, by
# `unicodedata.unidata_version`: computing them takes seconds (every code point through
# each rule), which every process that builds a tokenizer graph would pay. Checked by
# tests/test_text.py; `python -m albert_tf.text` adds the running Python's version
# (`store_character_classes`).
CHARACTER_CLASSES_FILE = os.path.join(os.path.dirname(__file__), "character_classes.json")


@functools.lru_cache(maxsize=None)
def character_classes() -> dict[str, str]:
    """RE2 classes of the Python tokenizers' character rules, by name: `space`
    (str.isspace), `combining`, `control`, `bert_space`, `nonspacing`, `punctuation`,
    `cjk` (`computed_character_classes()`, read from `CHARACTER_CLASSES_FILE` when it
    holds those of this Python's Unicode version)."""
    import json

    with open(CHARACTER_CLASSES_FILE, encoding="utf-8") as f:
        stored = json.load(f).get(unicodedata.unidata_version)
    return stored if stored is not None else computed_character_classes()


def computed_character_classes() -> dict[str, str]:
    """`character_classes()` computed from this Python's `unicodedata`."""
    from albert_tf.tokenization import _is_chinese_char, _is_control, _is_punctuation

    return {
        # str.split() / str.strip() whitespace.
        "space": _ranges_class(str.isspace),
        # What `preprocess_text` drops after NFKD.
        "combining": _ranges_class(lambda c: unicodedata.combining(c) != 0),
        # What BERT's basic tokenizer drops and turns into spaces.
        "control": _ranges_class(lambda c: ord(c) in (0, 0xFFFD) or _is_control(c)),
        "bert_space": _ranges_class(lambda c: c in " \t\n\r" or unicodedata.category(c) == "Zs"),
        "nonspacing": _ranges_class(lambda c: unicodedata.category(c) == "Mn"),
        "punctuation": _ranges_class(_is_punctuation),
        "cjk": _ranges_class(lambda c: _is_chinese_char(ord(c))),
    }


def store_character_classes() -> None:
    """Adds this Python's `computed_character_classes()` to `CHARACTER_CLASSES_FILE`."""
    import json

    with open(CHARACTER_CLASSES_FILE, encoding="utf-8") as f:
        stored = json.load(f)
    stored[unicodedata.unidata_version] = computed_character_classes()
    fileio.write_text_atomically(CHARACTER_CLASSES_FILE,
                                 json.dumps(stored, indent=1, sort_keys=True) + "\n")
    print(f"{CHARACTER_CLASSES_FILE}: Unicode {', '.join(sorted(stored))}")
