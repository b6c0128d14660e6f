"""Errors that carry a message meant for the user; stages print them and exit non-zero."""


class NlpzooError(Exception):
    """Base class: the message says what is wrong and, where possible, how to fix it."""


class ConfigError(NlpzooError):
    """A params.yaml section is invalid (unknown key, wrong type, impossible value)."""


class DataError(NlpzooError):
    """An input file is missing, corrupt or unusable (checksum, encoding, alignment, size)."""


class ChecksumError(DataError):
    """A downloaded or mirrored file does not match its registered SHA-256."""


class TrainingError(NlpzooError):
    """Training cannot go on (for example a non-finite loss)."""
