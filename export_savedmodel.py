"""Exports an ALBERT checkpoint as a SavedModel for TF Serving.

The program is `albert_tf/scripts/export_savedmodel.py`, installed as `albert-export`;
`python export_savedmodel.py --help` lists its flags.
"""

from albert_tf.scripts.export_savedmodel import run

if __name__ == "__main__":
    run()
