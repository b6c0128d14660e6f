"""The `glove` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require
from nlpzoo.families import Family

# vectors written out, AdaGrad accumulator convention, training path
OUTPUTS = ("W", "W+W~")
ADAGRAD = ("standard", "tool")
BACKENDS = ("numba", "torch")


@dataclass
class GloveConfig:
    dim: int = 100  # d, size of the word and context vectors
    # x_max: the paper's (and the tool's default) 100 is meant for corpora of billions of tokens;
    # on Brown (1 M tokens) nearly every count is far below 100, so f(X_ij) is tiny everywhere
    # and the vectors barely move. 10 is the value of the reference tool's own demo (demo.sh).
    x_max: float = 10.0
    alpha: float = 0.75  # α, the exponent of f (paper: 3/4)
    # η, AdaGrad's learning rate (the tool's -eta; paper and tool: 0.05). With `adagrad: tool`
    # G stays ≈ 1 on Brown, so a step is ≈ η f(X_ij) e w̃_j, and at 0.05 the vectors are still
    # far from fitted after 15 epochs (WS-353 ρ 0.097); 0.2 reaches ρ 0.17 (docs/glove.md)
    lr: float = 0.2
    batch_size: int = 16384  # non-zero entries per step of the torch path (numba: one by one)
    output: str = "W+W~"  # W | W+W~ (the paper's choice: the sum of word and context vectors)
    # AdaGrad's accumulator G (starts at 1) adds (η g)² (tool: glove.c's scaling, so η = 0.05
    # means what the tool's -eta means) or g² (standard: torch.optim.Adagrad's). Brown, d = 100,
    # 15 epochs, J = mean ½ f e²: tool η 0.05 → J 0.020 (the same at 1,024 entries per batch);
    # tool η 0.15 → 0.013; standard η 0.05 → 0.030, standard η 0.5 → 0.011 (see SparseAdagrad)
    adagrad: str = "tool"
    # sparse gradients (only the batch's rows); false gives dense V×(d+1) gradients, for DDP over
    # NCCL (GPUs), which all-reduces dense gradients only. The updates are the same either way
    sparse_grad: bool = True
    # numba: the compiled per-entry kernel (nlpzoo.models.glove_kernel: the tool's AdaGrad one
    # non-zero at a time; batch_size unused), on the CPU whatever trainer.accelerator says
    # (nlpzoo.placement); a run of several CPU processes (DDP) takes the torch path whatever
    # this says
    # torch: mini-batches of batch_size entries and SparseAdagrad (the path for GPUs)
    backend: str = "numba"
    # Hogwild threads of the numba kernel (lock-free, as the tool's threads); 1 visits the
    # entries in the epoch's order, so a run is deterministic; more are faster but not
    # bit-reproducible
    threads: int = 1

    def kernel_device(self) -> str | None:
        """The device the kernel needs (nlpzoo.placement): the numba kernel's is the CPU."""
        return "cpu" if self.backend == "numba" else None

    def sparse_gradients(self) -> tuple[str, str] | None:
        """Why its gradients are sparse, and what to do under DDP on GPUs."""
        if not self.sparse_grad:
            return None
        return (
            "sparse_grad: true gives sparse gradients",
            "set sparse_grad: false (dense gradients, the same updates) or train it on one GPU "
            "(trainer: {devices: 1})",
        )

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
        require(
            self.backend in BACKENDS,
            "backend",
            f"must be one of {BACKENDS}, got {self.backend!r}",
        )
        require(self.threads >= 1, "threads", f"must be >= 1, got {self.threads}")


FAMILY = Family(
    "glove",
    GloveConfig,
    "nlpzoo.models.glove:Glove",
    task="vectors",
    input="cooccur",
    fit="lightning",
    vectors=True,
    manual_step=True,
    own_optimizer=True,
)
