"""The `decoder_mt` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nlpzoo.families import Family
from nlpzoo.families.common import AdamSettings, check_adam
from nlpzoo.families.translation import check_mt_config, check_sizes


@dataclass
class DecoderMTConfig(AdamSettings):
    d_model: int = 256  # C
    heads: int = 4  # h; d_k = 64
    num_layers: int = 6  # L; 6 blocks ≈ the parameters of a 3 + 3 layer encoder–decoder
    d_ff: int = 1024  # inner FFN size, 4·C
    dropout: float = 0.1
    norm: str = "post"  # post (Vaswani et al.) | pre (GPT-2)
    max_positions: int = 256  # longest `<s> source <sep> target` sequence
    label_smoothing: float = 0.1
    batch_size: int = 128  # sentence pairs per step
    max_len: int = 64  # training pairs with a longer side (in pieces) are skipped
    optimizer: str = "adam"
    lr: float = 0.001  # peak, after the warm-up
    adam_beta2: float = 0.98  # Vaswani et al. §5.3
    lr_decay: float = 0.0
    warmup_steps: int = 800
    weight_decay: float = 0.0
    beam_size: int = 5
    length_penalty: float = 0.6  # α of lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016); 0 = none
    max_len_ratio: float = 1.5  # a translation ends by ratio · |source| + 10 pieces
    # source and target share one positions table (`<s> source <sep> target`), not a field
    one_sequence: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_adam(self)
        check_mt_config(self)
        check_sizes(self)


FAMILY = Family(
    "decoder_mt",
    DecoderMTConfig,
    "nlpzoo.models.decoder_mt:DecoderMT",
    task="mt",
    input="parallel",
    fit="lightning",
)
