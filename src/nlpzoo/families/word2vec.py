"""The `word2vec` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require
from nlpzoo.families import Family

# centre words per step of the batched (PyTorch) path, the largest that stay stable at
# word2vec.c's learning rates
BATCH_SIZES = {
    ("cbow", "negative"): 1024,
    ("cbow", "hierarchical"): 256,
    ("skipgram", "negative"): 256,
    ("skipgram", "hierarchical"): 128,
}


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
    # the input vectors start uniform in [−init_scale/d, init_scale/d): word2vec.c's 0.5 (gensim
    # 4 draws from twice that range, 1.0); the output vectors start at zero either way
    init_scale: float = 0.5
    batch_size: int | None = None  # centre words per step; null: BATCH_SIZES[model, objective]
    # numba: the compiled per-pair kernel (word2vec.c's SGD; batch_size unused), on the CPU
    # whatever trainer.accelerator says (nlpzoo.placement); a run of several CPU processes
    # (DDP) takes the torch path whatever this says
    # torch: batched PyTorch steps of batch_size centres (the path for GPUs)
    backend: str = "numba"
    # Hogwild threads of the numba kernel (lock-free, as word2vec.c's); 1 trains the stream in
    # order, so a run is deterministic; more are faster but not bit-reproducible
    threads: int = 1

    def kernel_device(self) -> str | None:
        """The device the kernel needs (nlpzoo.placement): the numba kernel's is the CPU."""
        return "cpu" if self.backend == "numba" else None

    def sparse_gradients(self) -> tuple[str, str] | None:
        """Why its gradients are sparse, and what to do under DDP on GPUs: the torch path's
        embedding gradients are always sparse (the numba path trains in one CPU process)."""
        if self.backend != "torch":
            return None
        return (
            "word2vec's torch path has sparse embedding gradients",
            "train it on one GPU (trainer: {devices: 1})",
        )

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
        require(self.init_scale > 0, "init_scale", f"must be positive, got {self.init_scale}")
        require(
            self.backend in ("numba", "torch"),
            "backend",
            f"must be numba or torch, got {self.backend!r}",
        )
        require(self.threads >= 1, "threads", f"must be >= 1, got {self.threads}")
        if self.lr is None:
            self.lr = 0.05 if self.model == "cbow" else 0.025  # word2vec.c's defaults
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")


FAMILY = Family(
    "word2vec",
    Word2VecConfig,
    "nlpzoo.models.word2vec:Word2Vec",
    task="vectors",
    input="pairs",
    fit="lightning",
    vectors=True,
    manual_step=True,
    own_optimizer=True,
)
