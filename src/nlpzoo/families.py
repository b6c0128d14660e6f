"""The model families: one record per family, and each family's params section (its config).

A `Family` says what a run of that family needs: its config dataclass (the run's own section of
params.yaml), its model class, the task it is scored on, the input its data loader yields, and how
it is fitted. This module imports no torch: `nlpzoo validate` and the data stages check every
section without loading a deep-learning library; the model class is imported on first use.

Adding a family: its model file under `nlpzoo/models/`, one `register(Family(...))` here (with its
config dataclass), and its params section. See docs/design.md §3 for the contract of each task.
"""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from nlpzoo.config import require
from nlpzoo.errors import ConfigError

TASKS = ("lm", "vectors", "mt")
INPUTS = ("counts", "window", "stream", "pairs", "cooccur", "parallel")
FITS = ("count", "lightning", "closed_form")

# output layers of the neural language models (nlpzoo.models.outputs)
KINDS = ("softmax", "hierarchical", "adaptive")
# n-gram orders the Kneser-Ney model supports
MIN_ORDER, MAX_ORDER = 2, 5
# word2vec: centre words per step of the batched (PyTorch) path, the largest that stay stable at
# word2vec.c's learning rates
BATCH_SIZES = {
    ("cbow", "negative"): 1024,
    ("cbow", "hierarchical"): 256,
    ("skipgram", "negative"): 256,
    ("skipgram", "hierarchical"): 128,
}
# GloVe: vectors written out, AdaGrad accumulator convention
OUTPUTS = ("W", "W+W~")
ADAGRAD = ("standard", "tool")


@dataclass
class AdamSettings:
    """Adam's constants (Kingma & Ba 2015), in every family trained with it."""

    adam_beta1: float = 0.9  # β_1
    adam_beta2: float = 0.999  # β_2 (Vaswani et al. 2017: 0.98)
    adam_eps: float = 1e-8  # ε (Vaswani et al. 2017: 1e-9)


def check_adam(cfg: Any) -> None:
    require(0.0 <= cfg.adam_beta1 < 1.0, "adam_beta1", f"must be in [0, 1), got {cfg.adam_beta1}")
    require(0.0 <= cfg.adam_beta2 < 1.0, "adam_beta2", f"must be in [0, 1), got {cfg.adam_beta2}")
    require(cfg.adam_eps > 0, "adam_eps", f"must be positive, got {cfg.adam_eps}")


def check_mt_config(cfg: Any) -> None:
    """Checks of the keys every translation family's config has (training, decoding)."""
    for key in ("batch_size", "beam_size"):
        require(getattr(cfg, key) >= 1, key, f"must be >= 1, got {getattr(cfg, key)}")
    require(cfg.max_len >= 0, "max_len", "must be >= 0 (0: keep every pair)")
    require(0.0 <= cfg.dropout < 1.0, "dropout", f"must be in [0, 1), got {cfg.dropout}")
    require(cfg.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
    require(cfg.lr > 0, "lr", f"must be positive, got {cfg.lr}")
    require(cfg.lr_decay >= 0, "lr_decay", "must be >= 0")
    require(cfg.warmup_steps >= 0, "warmup_steps", "must be >= 0")
    require(not (cfg.lr_decay and cfg.warmup_steps), "lr_decay", "must be 0 with warmup_steps")
    require(cfg.weight_decay >= 0, "weight_decay", "must be >= 0")
    require(0.0 <= cfg.label_smoothing < 1.0, "label_smoothing", "must be in [0, 1)")
    require(cfg.length_penalty >= 0, "length_penalty", "must be >= 0")
    require(cfg.max_len_ratio > 0, "max_len_ratio", "must be positive")


def check_sizes(c: Any) -> None:
    """The size checks shared by the Transformer configs (encoder-decoder and decoder-only)."""
    for key in ("d_model", "heads", "num_layers", "d_ff", "max_positions"):
        require(getattr(c, key) >= 1, key, f"must be >= 1, got {getattr(c, key)}")
    require(c.d_model % c.heads == 0, "heads", f"must divide d_model ({c.d_model}), got {c.heads}")
    require(c.d_model % 2 == 0, "d_model", "must be even (sin/cos position pairs)")
    require(c.norm in ("post", "pre"), "norm", f"must be post or pre, got {c.norm!r}")


# --------------------------------------------------------------------------- configs


@dataclass
class NgramConfig:
    """`ngram` section of params.yaml."""

    family: str = "ngram"
    order: int = 3

    def __post_init__(self) -> None:
        if self.family != "ngram":
            raise ConfigError(f"ngram: family must be 'ngram', got {self.family!r}")
        if (
            isinstance(self.order, bool)
            or not isinstance(self.order, int)
            or not MIN_ORDER <= self.order <= MAX_ORDER
        ):
            raise ConfigError(
                f"ngram: order must be an integer in [{MIN_ORDER}, {MAX_ORDER}], got {self.order!r}"
            )


@dataclass
class NNLMConfig(AdamSettings):
    context_size: int = 4  # n-1 previous words (the paper's best Brown models: n = 5)
    emb_dim: int = 60  # m, size of the word feature vectors C(w)
    hidden_dim: int = 100  # h, tanh hidden units
    direct: bool = False  # direct connections W from features to outputs (paper: yes/no both tried)
    output: str = "softmax"  # softmax | hierarchical (Huffman tree) | adaptive (Grave et al. 2017)
    cutoffs: list[int] = field(default_factory=lambda: [2000, 6000])  # adaptive: cluster starts
    div_value: float = 4.0  # adaptive: tail i projects to size d / div_value^(i+1)
    dropout: float = 0.0  # not in the paper; 0 reproduces it
    batch_size: int = 256
    optimizer: str = "adam"  # adam | sgd (the paper: sgd with lr / (1 + lr_decay * step))
    lr: float = 1e-3
    lr_decay: float = 0.0  # r in ε_t = ε_0 / (1 + r t)
    weight_decay: float = 1e-5  # on weights, not biases (paper: 1e-4)

    def __post_init__(self) -> None:
        check_adam(self)
        for key in ("context_size", "emb_dim", "hidden_dim", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(self.output in KINDS, "output", f"must be one of {KINDS}, got {self.output!r}")
        bounds = [0, *self.cutoffs]
        require(
            all(a < b for a, b in itertools.pairwise(bounds)),
            "cutoffs",
            f"must be strictly increasing positive ids, got {self.cutoffs}",
        )
        require(self.div_value >= 1, "div_value", f"must be >= 1, got {self.div_value}")
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")


@dataclass
class RNNLMConfig(AdamSettings):
    cell: str = "lstm"  # rnn (Elman tanh) | lstm
    emb_dim: int = 200  # d, size of the input word vectors E w
    hidden_dim: int = 200  # h, units per recurrent layer
    num_layers: int = 2  # L, stacked recurrent layers (Zaremba: 2)
    dropout: float = 0.2  # on embeddings, between layers, before the output (Zaremba medium: 0.5)
    tie_weights: bool = True  # output matrix U = input embedding E (needs emb_dim == hidden_dim)
    bptt: int = 35  # T, truncated back-propagation length (tokens per block)
    batch_size: int = 20  # B, parallel streams (Zaremba: 20)
    optimizer: str = "adam"  # adam | sgd (papers: sgd, lr 1 with clip 5, or lr 20 with clip 0.25)
    lr: float = 1e-3
    lr_decay: float = 0.0  # r in ε_t = ε_0 / (1 + r t), sgd only (Zaremba: ÷2 per epoch instead)
    weight_decay: float = 0.0  # dropout is the regulariser here, as in Zaremba
    # softmax (full, over V) | adaptive (Grave et al. 2017: frequency clusters) | hierarchical
    # (Huffman tree, Morin & Bengio 2005 / Mikolov 2013); all give exact normalised probabilities
    output: str = "softmax"
    cutoffs: list[int] = field(default_factory=lambda: [2000, 6000])  # adaptive: cluster bounds
    div_value: float = 4.0  # adaptive: tail i projects to hidden_dim / div_value^(i+1)
    init_range: float = 0.1  # every parameter ~ U(-r, r) (Zaremba: 0.1 small, 0.05 medium)

    def __post_init__(self) -> None:
        check_adam(self)
        require(self.cell in ("rnn", "lstm"), "cell", f"must be rnn or lstm, got {self.cell!r}")
        for key in ("emb_dim", "hidden_dim", "num_layers", "bptt", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(
            not self.tie_weights or self.emb_dim == self.hidden_dim,
            "tie_weights",
            f"needs emb_dim == hidden_dim (the output matrix is the embedding), got "
            f"emb_dim {self.emb_dim} and hidden_dim {self.hidden_dim}",
        )
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        require(self.output in KINDS, "output", f"must be one of {KINDS}, got {self.output!r}")
        require(
            not self.tie_weights or self.output == "softmax",
            "tie_weights",
            f"ties the embedding to a full softmax only; set tie_weights: false with output "
            f"{self.output!r}",
        )
        require(self.div_value >= 1, "div_value", f"must be >= 1, got {self.div_value}")
        require(self.init_range > 0, "init_range", f"must be positive, got {self.init_range}")


@dataclass
class TransformerLMConfig(AdamSettings):
    d_model: int = 256  # C, model width (paper base: 512)
    heads: int = 4  # h, attention heads; d_k = d_model / heads = 64 as in the paper (base: 8)
    num_layers: int = 4  # L, decoder blocks (paper base: N = 6)
    d_ff: int = 1024  # inner FFN size, 4·d_model as in the paper (base: 2048)
    dropout: float = 0.1  # P_drop on sub-layer outputs and embedding sums (paper base: 0.1)
    block_size: int = 128  # T, the training context length; longest input accepted
    positions: str = "sinusoidal"  # sinusoidal (the paper) | learned (Radford et al. 2018)
    norm: str = "post"  # post (the paper: LN(x + Sublayer(x))) | pre (x + Sublayer(LN(x)))
    batch_size: int = 16  # blocks of block_size tokens per step: 2048 tokens
    optimizer: str = "adam"  # adam (the paper) | sgd
    lr: float = 1e-3  # peak learning rate, reached after warmup_steps
    lr_decay: float = 0.0  # sgd's ε_0 / (1 + r t); 0 when the warm-up schedule is used
    warmup_steps: int = 200  # linear warm-up, then ∝ 1/√step (paper: 4000 of 100k steps)
    weight_decay: float = 0.0  # the paper uses none

    def __post_init__(self) -> None:
        check_adam(self)
        for key in ("d_model", "heads", "num_layers", "d_ff", "block_size", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(
            self.d_model % self.heads == 0,
            "heads",
            f"must divide d_model ({self.d_model}), got {self.heads}",
        )
        require(
            self.positions in ("sinusoidal", "learned"),
            "positions",
            f"must be sinusoidal or learned, got {self.positions!r}",
        )
        require(
            self.positions != "sinusoidal" or self.d_model % 2 == 0,
            "d_model",
            f"must be even for sinusoidal positions (sin/cos pairs), got {self.d_model}",
        )
        require(self.norm in ("post", "pre"), "norm", f"must be post or pre, got {self.norm!r}")
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.warmup_steps >= 0, "warmup_steps", "must be >= 0")
        require(
            not (self.lr_decay and self.warmup_steps),
            "lr_decay",
            "must be 0 when warmup_steps > 0 (the warm-up schedule already decays as 1/√step)",
        )
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")


@dataclass
class Word2VecConfig:
    model: str = "skipgram"  # skipgram | cbow
    objective: str = "negative"  # negative (sampling) | hierarchical (softmax)
    dim: int = 100  # d, size of the word vectors
    window: int = 5  # largest distance of a context word (dynamic window: 1..window per centre)
    negative: int = 5  # K noise words per pair (negative sampling)
    ns_exponent: float = 0.75  # noise distribution ∝ count^0.75 (2013b §2.2)
    sample: float = 1e-3  # sub-sampling threshold s (2013b §2.3); 0 keeps every token
    lr: float | None = None  # starting rate per pair; null: word2vec.c's 0.025 sg / 0.05 cbow
    min_lr_ratio: float = 1e-4  # the rate never falls below lr·min_lr_ratio (word2vec.c)
    batch_size: int | None = None  # centre words per step; null: BATCH_SIZES[model, objective]

    def __post_init__(self) -> None:
        require(
            self.model in ("skipgram", "cbow"),
            "model",
            f"must be skipgram or cbow, got {self.model!r}",
        )
        require(
            self.objective in ("negative", "hierarchical"),
            "objective",
            f"must be negative or hierarchical, got {self.objective!r}",
        )
        if self.batch_size is None:
            self.batch_size = BATCH_SIZES[self.model, self.objective]
        for key in ("dim", "window", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(self.negative >= 1, "negative", f"must be >= 1, got {self.negative}")
        require(self.ns_exponent >= 0, "ns_exponent", f"must be >= 0, got {self.ns_exponent}")
        require(self.sample >= 0, "sample", f"must be >= 0, got {self.sample}")
        require(0 <= self.min_lr_ratio <= 1, "min_lr_ratio", "must be in [0, 1]")
        if self.lr is None:
            self.lr = 0.05 if self.model == "cbow" else 0.025  # word2vec.c's defaults
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")


@dataclass
class GloveConfig:
    dim: int = 100  # d, size of the word and context vectors
    # x_max: the paper's (and the tool's default) 100 is meant for corpora of billions of tokens;
    # on Brown (1 M tokens) nearly every count is far below 100, so f(X_ij) is tiny everywhere
    # and the vectors barely move. 10 is the value of the reference tool's own demo (demo.sh).
    x_max: float = 10.0
    alpha: float = 0.75  # α, the exponent of f (paper: 3/4)
    lr: float = 0.05  # η, AdaGrad's learning rate (the tool's -eta)
    batch_size: int = 16384  # non-zero entries per step
    output: str = "W+W~"  # W | W+W~ (the paper's choice: the sum of word and context vectors)
    # AdaGrad's accumulator G (starts at 1) adds (η g)² (tool: glove.c's scaling, so η = 0.05
    # means what the tool's -eta means) or g² (standard: torch.optim.Adagrad's). Brown, d = 100,
    # 15 epochs, J = mean ½ f e²: tool η 0.05 → J 0.020 (the same at 1,024 entries per batch);
    # tool η 0.15 → 0.013; standard η 0.05 → 0.030, standard η 0.5 → 0.011 (see SparseAdagrad)
    adagrad: str = "tool"
    # sparse gradients (only the batch's rows); false gives dense V×(d+1) gradients, for DDP over
    # NCCL (GPUs), which all-reduces dense gradients only. The updates are the same either way
    sparse_grad: bool = True

    def __post_init__(self) -> None:
        require(self.dim >= 1, "dim", f"must be >= 1, got {self.dim}")
        require(self.x_max > 0, "x_max", f"must be positive, got {self.x_max}")
        require(self.alpha > 0, "alpha", f"must be positive, got {self.alpha}")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        require(self.output in OUTPUTS, "output", f"must be one of {OUTPUTS}, got {self.output!r}")
        require(
            self.adagrad in ADAGRAD, "adagrad", f"must be one of {ADAGRAD}, got {self.adagrad!r}"
        )


@dataclass
class SVDConfig:
    dim: int = 100  # d, number of singular vectors kept
    cds: float = 0.75  # α, context-distribution smoothing exponent (1 = none; Levy et al.: 0.75)
    eig: float = 0.5  # p, eigenvalue weighting: vectors U Σ^p (1 classic, 0 U only)
    neg: float = 1.0  # k, the shift: max(PMI − log k, 0) (1 = plain PPMI; SGNS's k negatives)
    seed: int = 0  # ARPACK's starting vector

    def __post_init__(self) -> None:
        require(self.dim >= 1, "dim", f"must be >= 1, got {self.dim}")
        require(0 < self.cds <= 1, "cds", f"must be in (0, 1], got {self.cds}")
        require(self.eig >= 0, "eig", f"must be >= 0, got {self.eig}")
        require(self.neg >= 1, "neg", f"must be >= 1 (k in log k), got {self.neg}")


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

    def __post_init__(self) -> None:
        check_adam(self)
        check_mt_config(self)
        check_sizes(self)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Family:
    """What the shared lifecycle needs to know of a family.

    `model` is "module:Class", imported by `model_class()` on first use (so this registry stays
    free of torch); a class may be given directly (e.g. a family defined in a test).
    """

    name: str
    config: type  # dataclass built from the run's params section
    model: Any  # "module:Class" or the class itself
    task: str  # lm | vectors | mt: the data it trains on and how it is scored
    input: str  # counts | window | stream | pairs | cooccur | parallel: what its loader yields
    fit: str  # count | lightning | closed_form
    stateful: bool = False  # recurrent: the state is carried across BPTT blocks

    def __post_init__(self) -> None:
        for key, allowed in (("task", TASKS), ("input", INPUTS), ("fit", FITS)):
            if getattr(self, key) not in allowed:
                raise ConfigError(
                    f"family '{self.name}': {key} must be one of {allowed}, got "
                    f"{getattr(self, key)!r}"
                )

    @property
    def neural(self) -> bool:
        return self.fit == "lightning"

    def model_class(self) -> type:
        if not isinstance(self.model, str):
            return self.model
        module, _, attr = self.model.partition(":")
        return getattr(importlib.import_module(module), attr)


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add (or replace) a family in the registry; returns it."""
    FAMILIES[family.name] = family
    return family


def get(name: str) -> Family:
    return FAMILIES[name]


for _family in (
    Family("ngram", NgramConfig, "nlpzoo.models.ngram:KneserNey", "lm", "counts", "count"),
    Family("nnlm", NNLMConfig, "nlpzoo.models.nnlm:NNLM", "lm", "window", "lightning"),
    Family("rnn_lm", RNNLMConfig, "nlpzoo.models.rnn_lm:RNNLM", "lm", "stream", "lightning", True),
    Family(
        "transformer_lm",
        TransformerLMConfig,
        "nlpzoo.models.transformer_lm:TransformerLM",
        "lm",
        "stream",
        "lightning",
    ),
    Family(
        "word2vec",
        Word2VecConfig,
        "nlpzoo.models.word2vec:Word2Vec",
        "vectors",
        "pairs",
        "lightning",
    ),
    Family("glove", GloveConfig, "nlpzoo.models.glove:Glove", "vectors", "cooccur", "lightning"),
    Family("svd", SVDConfig, "nlpzoo.models.svd:PPMISVD", "vectors", "cooccur", "closed_form"),
    Family(
        "seq2seq", Seq2SeqConfig, "nlpzoo.models.seq2seq:Seq2Seq", "mt", "parallel", "lightning"
    ),
    Family(
        "attention",
        AttentionConfig,
        "nlpzoo.models.attention:Bahdanau",
        "mt",
        "parallel",
        "lightning",
    ),
    Family(
        "transformer",
        TransformerConfig,
        "nlpzoo.models.transformer:Transformer",
        "mt",
        "parallel",
        "lightning",
    ),
    Family(
        "decoder_mt",
        DecoderMTConfig,
        "nlpzoo.models.decoder_mt:DecoderMT",
        "mt",
        "parallel",
        "lightning",
    ),
):
    register(_family)
