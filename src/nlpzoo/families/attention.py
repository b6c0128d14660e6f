"""The `attention` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require
from nlpzoo.families import Family
from nlpzoo.families.common import AdamSettings, check_adam
from nlpzoo.families.translation import check_mt_config


@dataclass
class AttentionConfig(AdamSettings):
    emb_dim: int = 128  # E (paper: 620)
    hidden_dim: int = 256  # H, per encoder direction and for the decoder (paper: 1000)
    attn_dim: int = 128  # A, the alignment model's hidden size (paper: 1000)
    cell: str = "gru"  # gru (the paper's gated unit) | lstm
    maxout: int = 0  # size of the maxout output layer (paper: 500); 0 = a linear deep output
    dropout: float = 0.3  # on embeddings and before the output layer (paper: none)
    batch_size: int = 64  # sentence pairs per step (paper: 80)
    max_len: int = 64  # training pairs with a longer side (in pieces) are skipped
    optimizer: str = "adam"  # adam | sgd (paper: Adadelta)
    lr: float = 0.002
    lr_decay: float = 0.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    beam_size: int = 5  # beam search width at evaluation (paper: 12)
    length_penalty: float = 0.6  # α of lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016); 0 = none
    max_len_ratio: float = 1.5  # a translation ends by ratio · |source| + 10 pieces

    def __post_init__(self) -> None:
        check_adam(self)
        check_mt_config(self)
        for key in ("emb_dim", "hidden_dim", "attn_dim"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(self.cell in ("gru", "lstm"), "cell", f"must be gru or lstm, got {self.cell!r}")
        require(self.maxout >= 0, "maxout", "must be >= 0 (0: no maxout layer)")


FAMILY = Family(
    "attention",
    AttentionConfig,
    "nlpzoo.models.attention:Bahdanau",
    task="mt",
    input="parallel",
    fit="lightning",
    attention_maps=True,
    tutorial_bleu=28.3,  # bentrevett's pytorch-seq2seq tutorial, test_2016_flickr
)
