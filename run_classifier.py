"""Fine-tunes ALBERT on a GLUE task, RACE, C3, SWAG or your own files.

The program is `albert_tf/scripts/run_classifier.py`, installed as `albert-run-classifier`;
`python run_classifier.py --help` lists its flags.
"""

from albert_tf.scripts.run_classifier import run

if __name__ == "__main__":
    run()
