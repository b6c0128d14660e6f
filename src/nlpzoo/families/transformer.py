"""The `transformer` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.families import Family
from nlpzoo.families.common import AdamSettings, check_adam
from nlpzoo.families.translation import check_mt_config, check_sizes


@dataclass
class TransformerConfig(AdamSettings):
    d_model: int = 256  # C (paper base: 512)
    heads: int = 4  # h; d_k = C / h = 64 as in the paper (base: 8)
    num_layers: int = 3  # N, encoder and decoder layers each (paper: 6)
    d_ff: int = 1024  # inner FFN size, 4·C as in the paper (base: 2048)
    dropout: float = 0.1  # P_drop (paper base: 0.1)
    norm: str = "post"  # post (the paper: LN(x + Sublayer(x))) | pre (x + Sublayer(LN(x)))
    max_positions: int = 256  # longest source or target the positions table covers
    label_smoothing: float = 0.1  # ε_ls (paper: 0.1)
    batch_size: int = 128  # sentence pairs per step (paper: ~25k tokens)
    max_len: int = 64  # training pairs with a longer side (in pieces) are skipped
    optimizer: str = "adam"  # adam (the paper) | sgd
    lr: float = 0.001  # peak learning rate, reached after warmup_steps (paper: ≈ 7e-4 for base)
    adam_beta2: float = 0.98  # Vaswani et al. §5.3 (β_1 0.9, ε 1e-9: adam_eps)
    lr_decay: float = 0.0
    warmup_steps: int = 800  # linear warm-up, then ∝ 1/√step (paper: 4000)
    weight_decay: float = 0.0
    beam_size: int = 5  # beam search width at evaluation (paper: 4)
    length_penalty: float = 0.6  # α of lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016; paper 0.6)
    max_len_ratio: float = 1.5  # a translation ends by ratio · |source| + 10 pieces

    def __post_init__(self) -> None:
        check_adam(self)
        check_mt_config(self)
        check_sizes(self)


FAMILY = Family(
    "transformer",
    TransformerConfig,
    "nlpzoo.models.transformer:Transformer",
    task="mt",
    input="parallel",
    fit="lightning",
    attention_maps=True,
    tutorial_bleu=36.5,  # bentrevett's pytorch-seq2seq tutorial, test_2016_flickr
)
