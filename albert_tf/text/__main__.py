"""`python -m albert_tf.text`: stores the running Python's character classes
(`albert_tf.text.unicode_classes.store_character_classes`)."""

from albert_tf.text.unicode_classes import store_character_classes

store_character_classes()
