"""The model families: family name → (Config dataclass, model class). One file per family."""

from __future__ import annotations

from nlpzoo.models import ngram, nnlm

# task: what data the family trains on and how it is scored
FAMILIES = {
    "ngram": (ngram.Config, ngram.KneserNey),
    "nnlm": (nnlm.Config, nnlm.NNLM),
}

TASKS = {
    "ngram": "lm",
    "nnlm": "lm",
}

# families trained with Lightning (the others fit in closed form or by counting)
NEURAL = {"nnlm"}
