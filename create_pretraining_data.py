"""Creates ALBERT pretraining TFRecords (masked LM + sentence order) from raw text.

The program is `albert_tf/scripts/create_pretraining_data.py`, installed as
`albert-create-pretraining-data`; `python create_pretraining_data.py --help` lists its flags.
"""

from albert_tf.scripts.create_pretraining_data import run

if __name__ == "__main__":
    run()
