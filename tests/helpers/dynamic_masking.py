"""What the dynamic-masking tests share: the fixture paths, statistical bounds, real
text cut into instances, and ways to read masked batches back."""

import math
import re

import numpy as np

from tests.helpers.paths import FIXTURES, SPM_MODEL

SPM = str(SPM_MODEL)
REAL_TEXT = FIXTURES / "text" / "real_sample.txt"
CLS, SEP, MASK = 2, 3, 4
Z = 5.0  # statistical bounds: 5 standard errors (every draw is seeded: no flakes)


def real_sentences():
    lines = REAL_TEXT.read_text(encoding="utf-8").splitlines()
    return [s for line in lines for s in re.split(r"(?<=[.!?])\s+", line)
            if len(s.split()) >= 3]


def real_instances(tokenizer, count, max_len, seed):
    """`[CLS] A [SEP] B [SEP]` windows of real text (cut anywhere, so a segment may
    start inside a word): padded ids, segment ids, mask [count, max_len]."""
    rng = np.random.default_rng(seed)
    stream = np.array([i for line in REAL_TEXT.read_text(encoding="utf-8").splitlines()
                       for i in tokenizer.encode(line)], np.int32)
    ids = np.zeros((count, max_len), np.int32)
    segments = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for row in range(count):
        total = int(rng.integers(8, max_len - 2))
        len_a = int(rng.integers(1, total))
        start = int(rng.integers(0, len(stream) - total))
        a, b = stream[start:start + len_a], stream[start + len_a:start + total]
        seq = np.concatenate([[CLS], a, [SEP], b, [SEP]])
        ids[row, :len(seq)] = seq
        segments[row, len(a) + 2:len(seq)] = 1
        mask[row, :len(seq)] = 1
    return ids, segments, mask


def masked_runs(positions_per_row):
    """Lengths of the runs of adjacent masked positions, over all rows."""
    runs = []
    for positions in positions_per_row:
        run = 0
        for i, p in enumerate(positions):
            run = run + 1 if i and p == positions[i - 1] + 1 else 1
            if i == len(positions) - 1 or positions[i + 1] != p + 1:
                runs.append(run)
    return np.array(runs)


def assert_same_proportion(a_hits, a_total, b_hits, b_total, what):
    p = (a_hits + b_hits) / (a_total + b_total)
    se = math.sqrt(max(p * (1 - p), 1e-12) * (1 / a_total + 1 / b_total))
    assert abs(a_hits / a_total - b_hits / b_total) <= Z * se + 1e-9, (
        what, a_hits / a_total, b_hits / b_total)


def assert_same_mean(a, b, what):
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = math.sqrt(a.var() / len(a) + b.var() / len(b))
    assert abs(a.mean() - b.mean()) <= Z * se + 1e-9, (what, a.mean(), b.mean())


def assert_proportion(hits, total, expected, what):
    se = math.sqrt(expected * (1 - expected) / total)
    assert abs(hits / total - expected) <= Z * se + 1e-9, (what, hits / total, expected)


def restore(features):
    """The ids before masking: `masked_lm_ids` put back at `masked_lm_positions`."""
    ids = np.array(features["input_ids"])
    for row in range(ids.shape[0]):
        weights = np.asarray(features["masked_lm_weights"][row]) > 0
        positions = np.asarray(features["masked_lm_positions"][row])[weights]
        ids[row, positions] = np.asarray(features["masked_lm_ids"][row])[weights]
    return ids


def as_numpy(batches):
    return [{k: v.numpy() for k, v in batch.items()} for batch in batches]


def write_documents(path, documents):
    path.write_text("".join("\n".join(doc) + "\n\n" for doc in documents), encoding="utf-8")
    return str(path)
