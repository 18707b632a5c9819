"""The end-to-end demo: `make demo`, or `python demo.py [--work_dir=demo_output] [--quick]`.

Generates a corpus and a review task, trains a SentencePiece model, pretrains a small
ALBERT (run_pretraining.py), fine-tunes it (run_classifier.py), exports it and asks the
SavedModel about raw text in a fresh process; prints what it learned and where the files
are. A rerun resumes (finished steps are kept); --fresh starts clean. The work is
`demo_app.steps` (beside this file: an application of albert_tf, not part of it).
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_demo():
    """Imports the demo (and so albert_tf and TensorFlow) with the native start-up
    messages it writes to stderr set aside, so that they do not drown the demo's
    progress; they are shown if the import fails. (The scripts the demo runs keep theirs
    in their logs.)"""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            from demo_app import steps as demo
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return demo


demo = _import_demo()
demo.define_flags()

if __name__ == "__main__":
    from absl import app

    app.run(demo.main)
