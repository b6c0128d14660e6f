"""The `seq2seq` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require
from nlpzoo.families import Family
from nlpzoo.families.common import AdamSettings, check_adam
from nlpzoo.families.translation import check_mt_config


@dataclass
class Seq2SeqConfig(AdamSettings):
    emb_dim: int = 256  # E (paper: 1000)
    hidden_dim: int = 512  # H, LSTM cells per layer (paper: 1000)
    num_layers: int = 2  # L, in the encoder and the decoder alike (paper: 4)
    dropout: float = 0.3  # between LSTM layers and before the output layer (paper: none)
    reverse_source: bool = True  # the paper's trick: read x_n .. x_1
    init_range: float = 0.08  # uniform init in [−r, r] (paper: 0.08)
    batch_size: int = 128  # sentence pairs per step (paper: 128)
    max_len: int = 64  # training pairs with a longer side (in pieces) are skipped
    optimizer: str = "adam"  # adam | sgd (paper: sgd, lr 0.7)
    lr: float = 0.002
    lr_decay: float = 0.0  # sgd: ε_t = ε_0 / (1 + r t)
    warmup_steps: int = 0
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    beam_size: int = 5  # beam search width at evaluation (paper: 12; 2 gets most of it)
    length_penalty: float = 0.6  # α of lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016); 0 = none
    max_len_ratio: float = 1.5  # a translation ends by ratio · |source| + 10 pieces

    def __post_init__(self) -> None:
        check_adam(self)
        check_mt_config(self)
        for key in ("emb_dim", "hidden_dim", "num_layers"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(self.init_range > 0, "init_range", "must be positive")


FAMILY = Family(
    "seq2seq",
    Seq2SeqConfig,
    "nlpzoo.models.seq2seq:Seq2Seq",
    task="mt",
    input="parallel",
    fit="lightning",
    tutorial_bleu=13.8,  # bentrevett's pytorch-seq2seq tutorial, test_2016_flickr
)
