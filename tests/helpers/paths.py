"""Where the tests' data lies: the repo's fixtures, and the shared data beside the repo
(used only by tests that skip when it is absent)."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SPM_MODEL = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
REAL_TEXT = (FIXTURES / "text" / "real_sample.txt").read_text(encoding="utf-8").splitlines()
SHARED_DATA = REPO.parent / "shared" / "data"
ALICE = REPO / "albert_tf" / "demo_text" / "alice_excerpt.txt"  # package data
