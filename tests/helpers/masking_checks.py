"""Checks the masking tests share (`test_masking`, `test_pretraining_data`): a binomial
bound, and words read back from `token_boundary` as the original defines them."""

import numpy as np

# Statistical bounds of 4.5 standard deviations: a false alarm about once in 150,000
# runs (and every draw is seeded, so a run is reproducible).
SIGMAS = 4.5


def within(observed_fraction, p, n):
    """|observed - p| within SIGMAS binomial standard deviations of n trials."""
    return abs(observed_fraction - p) <= SIGMAS * np.sqrt(p * (1 - p) / n)


def words_of(input_mask_len, ids_special, token_boundary):
    """Word index of each maskable position, by the original's rule read from the
    record (`token_boundary` marks word starts; special tokens belong to no word)."""
    word, words = -1, {}
    for i in range(input_mask_len):
        if ids_special[i]:
            continue
        if token_boundary[i] or word < 0:
            word += 1
        words[i] = word
    return words
