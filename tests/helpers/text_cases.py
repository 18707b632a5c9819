"""Texts and vocabularies for the tokenizer tests."""

import json

from tests.helpers.paths import FIXTURES

# What the ORIGINAL tokenization.py gives for texts with quotes and for every MRPC dev
# text (see fixtures/text/README.md).
ORIGINAL_PIECES = json.loads(
    (FIXTURES / "text" / "original_pieces.json").read_text(encoding="utf-8"))

# Hand-made cases for the corners of the rules.
EDGE_CASES = [
    "This is a test", "", "   ", "It cost 1,000, or 2,5, in 1990, then",
    "a1, b22,33, 4,", "Café naïve façade ÅNGSTRÖM ß ﬁ ½ x², Œuvre",
    "``quoted'' and \"plain\" quotes", "tabs\tand\nnew\r\nlines\u00a0nbsp\u3000ideographic",
    "日本語のテキスト, 中文句子。", "emoji 😀 and symbols © ™ → ∞", "MiXeD CaSe İstanbul",
    "control\u0007chars\u200bzero\ufeffwidth", "hyphen-ated words—and dashes – too",
    # Equal-score segmentations: tie-breaking must be the Python package's.
    "rated eee for excitement", "the $900000 (about R7.5-million)",
]


def make_wordpiece_vocab(path, texts, extra=()):
    """A BERT-style vocab: specials, frequent words, every character alone and as ##."""
    from albert_tf.tokenization import BasicTokenizer

    words, chars = {}, set()
    for text in texts:
        for word in BasicTokenizer(do_lower_case=True).tokenize(text):
            words[word] = words.get(word, 0) + 1
            chars.update(word)
    frequent = [w for w, n in sorted(words.items(), key=lambda x: -x[1])[:300]]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *extra, *frequent]
    tokens += sorted(chars) + ["##" + c for c in sorted(chars)]
    path.write_text("\n".join(dict.fromkeys(tokens)) + "\n", encoding="utf-8")
    return str(path)
