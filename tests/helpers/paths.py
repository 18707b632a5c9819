"""Where the tests' data lies: the repo's fixtures, and the shared data beside the repo
(used only by tests that skip when it is absent)."""

import os
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SPM_MODEL = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
REAL_TEXT = (FIXTURES / "text" / "real_sample.txt").read_text(encoding="utf-8").splitlines()
SHARED_DATA = REPO.parent / "shared" / "data"
ALICE = REPO / "demo_app" / "text" / "alice_excerpt.txt"  # the demo's

# The shared corpora are long: a test that checks every item of one checks every
# SHARED_STEP-th (from the first) in the default run, and all of them with
# ALBERT_TF_ALL_SHARED=1 (where the README's counts come from).
SHARED_STEP = 1 if os.environ.get("ALBERT_TF_ALL_SHARED") == "1" else 8


def shared_sample(items: list) -> list:
    """`items` of a shared corpus, every `SHARED_STEP`-th."""
    return list(items)[::SHARED_STEP]
