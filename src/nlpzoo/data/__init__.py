"""Data: sources, preparation, vocabularies, co-occurrence counts, and the loaders of each input."""
