"""nlpzoo: the classic neural NLP model families on one pipeline, one protocol, one report."""

__version__ = "0.1.0"
