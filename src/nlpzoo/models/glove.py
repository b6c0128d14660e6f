"""GloVe: Global Vectors for word representation (Pennington, Socher & Manning, EMNLP 2014).

A weighted least-squares fit of log co-occurrence counts by word and context vectors (eq. 8):

    J = Σ_{i,j: X_ij > 0}  f(X_ij) (w_iᵀ w̃_j + b_i + b̃_j − log X_ij)²

    f(x) = (x / x_max)^α  if x < x_max,  else 1                  (eq. 9; f(0) = 0)

X is the symmetric co-occurrence matrix (nlpzoo.data.cooccur), w_i the word vectors (rows of W),
w̃_j the context vectors (rows of W̃), b, b̃ their biases. The paper reports W + W̃ as the word
vectors (§4.2; `output: "W+W~"`); `output: "W"` keeps W alone.

Training follows the reference tool (glove.c): vectors and biases start at (rand − 0.5) / d,
every parameter has its own AdaGrad accumulator G starting at 1.0, and only the non-zero
entries are visited, in a random order, each epoch. Two ways to train, chosen by `backend`:

    numba   (default; CPU, one process) `manual_step` on a chunk of the epoch's order
            (nlpzoo.data.glove.CooccurChunks): the compiled kernel of nlpzoo.models.glove_kernel
            updates after every entry, as the tool does, with `threads` lock-free threads. The
            accumulators G are the optimizer's state (SparseAdagrad's "sum"), so checkpoints
            keep them and the torch path could continue from them.
    torch   a step takes a mini-batch of `batch_size` entries and touches only their rows
            (sparse gradients, `SparseAdagrad` below): an epoch is a few hundred vectorised
            steps. Under DDP (several processes) and on GPUs this is the path taken, whatever
            `backend` says; in one process it runs inside `manual_step` too.

Both follow the same rule (SparseAdagrad's, below); with one entry per mini-batch and one kernel
thread they compute the same updates. The gradient of one entry is the tool's:

    e   = w_iᵀ w̃_j + b_i + b̃_j − log X_ij                the residual
    ∂/∂w_i = f(X_ij) e w̃_j,   ∂/∂w̃_j = f(X_ij) e w_i,   ∂/∂b_i = ∂/∂b̃_j = f(X_ij) e

i.e. that of ½ f e², the cost the tool accumulates; the paper's J is twice the sum of it.
`forward` returns the *mean* of ½ f e² over the batch (the tool prints ½ Σ f e² / #non-zeros,
so an epoch's mean loss is the number it prints), but its gradient is that of the *sum*, so every
entry contributes its full gradient whatever the batch size, as in the tool. Entries of one
batch that share a row add their gradients before the AdaGrad step (the tool would apply them
one after the other).

Symbols: V vocabulary size, d = `dim`, B batch (non-zero entries per step).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from nlpzoo.cost import Cost
from nlpzoo.errors import ConfigError
from nlpzoo.families.glove import ADAGRAD, GloveConfig

Config = GloveConfig  # the `glove` params section (nlpzoo.families)


def weighting(x: torch.Tensor, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """f(x) = (x / x_max)^α capped at 1 (paper eq. 9): rare pairs count less, frequent ones
    are not over-weighted. f(0) = 0, so an absent pair would not count even if it were fed."""
    return (x / x_max).pow(alpha).clamp(max=1.0)


class SparseAdagrad(torch.optim.Optimizer):
    """AdaGrad on sparse (row) gradients: only the rows in the batch change, parameter and
    accumulator alike. The accumulator G starts at 1.0, as in glove.c ("so initial value of eta
    is equal to initial learning rate"). Per row r with gradient g (summed over the batch):

        standard:  G_r += g²;       θ_r −= η g / √G_r      first step η g / √(1 + g²)
        tool:      G_r += (η g)²;   θ_r −= η g / √G_r      first step η g / √(1 + η² g²)

    glove.c accumulates (η g)², as `tool` does, but *after* the step, so its first step is η g
    unbounded: harmless for one entry at a time, but a mini-batch sums the gradients of hundreds
    of entries of a frequent word, and that order diverged on Brown at 65,536 entries per batch.
    Both rules here add to G first, so no step exceeds η (standard) or 1 (tool) per coordinate.

    A non-finite loss stops training in the shared NonFiniteLoss callback (the tool skips the
    update instead and carries on); there is no clipping, as in the tool.
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float, rule: str = "standard") -> None:
        if rule not in ADAGRAD:
            raise ValueError(f"rule must be one of {ADAGRAD}, got {rule!r}")
        super().__init__(params, {"lr": lr, "rule": rule})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, tool = group["lr"], group["rule"] == "tool"
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["sum"] = torch.ones_like(p, memory_format=torch.preserve_format)
                rows, g = _row_gradient(p.grad)  # (u,) distinct rows, (u, ...) their gradients
                G = state["sum"].index_select(0, rows)  # (u, ...) accumulators of those rows
                G.addcmul_(g, g, value=lr * lr if tool else 1.0)  # G += (η g)² or g²
                p.index_add_(0, rows, g / G.sqrt(), alpha=-lr)  # θ −= η g / √G
                state["sum"].index_copy_(0, rows, G)
        return loss


def _row_gradient(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(distinct row ids (u,), their summed gradients (u, ...)) from a sparse or dense gradient."""
    if not grad.is_sparse:  # a row outside the batch has g = 0 and would not move anyway
        rows = grad.flatten(1).ne(0).any(1).nonzero().squeeze(1)  # (u,) rows with a gradient
        return rows, grad.index_select(0, rows)
    idx, vals = grad._indices()[0], grad._values()  # (n,) (n, ...) one entry per lookup
    rows, inverse = torch.unique(idx, return_inverse=True)  # (u,), (n,)
    summed = vals.new_zeros((rows.numel(), *vals.shape[1:])).index_add_(0, inverse, vals)
    return rows, summed


class Glove(nn.Module):
    """W, W̃ (V×d) and biases b, b̃ (V) fit to log X_ij on the non-zero entries; batches:
    inputs (B, 2) pairs (i, j), targets (B,) X_ij > 0."""

    def __init__(
        self, config: Config, vocab_size: int, counts: Sequence[int] | np.ndarray | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size
        d = config.dim
        # Each table row is [w_i, b_i] (d+1 numbers), the tool's layout: one lookup per side.
        # sparse: the backward pass yields only the looked-up rows, (B, d+1) per table
        self.word = nn.Embedding(vocab_size, d + 1, sparse=config.sparse_grad)  # [W | b]
        self.context = nn.Embedding(vocab_size, d + 1, sparse=config.sparse_grad)  # [W̃ | b̃]
        # glove.c: every vector entry and bias starts at (rand() / RAND_MAX − 0.5) / d
        for table in (self.word, self.context):
            nn.init.uniform_(table.weight, -0.5 / d, 0.5 / d)

    @property
    def W(self) -> torch.Tensor:
        return self.word.weight[:, :-1]  # (V, d)

    @property
    def W_context(self) -> torch.Tensor:
        return self.context.weight[:, :-1]  # (V, d)

    @property
    def b(self) -> torch.Tensor:
        return self.word.weight[:, -1]  # (V,)

    def residual(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """e = w_iᵀ w̃_j + b_i + b̃_j − log X_ij for each pair, (B,)."""
        u = self.word(inputs[:, 0])  # (B, d+1) [w_i, b_i]
        v = self.context(inputs[:, 1])  # (B, d+1) [w̃_j, b̃_j]
        dot = (u[:, :-1] * v[:, :-1]).sum(-1)  # (B,) w_iᵀ w̃_j
        return dot + u[:, -1] + v[:, -1] - torch.log(targets.to(u.dtype))

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[None, torch.Tensor]:
        """inputs (B, 2) pairs (i, j), targets (B,) X_ij > 0. Returns (None, loss): the loss's
        value is mean ½ f(X_ij) e², its gradient that of the sum Σ ½ f(X_ij) e² (see above)."""
        e = self.residual(inputs, targets)  # (B,)
        f = weighting(targets.to(e.dtype), self.config.x_max, self.config.alpha)  # (B,)
        cost = 0.5 * (f * e * e).sum()  # ½ Σ f e², the tool's cost of this batch
        mean = cost.detach() / max(targets.numel(), 1)
        return None, mean + (cost - cost.detach())  # value: the mean; gradient: the sum's

    def embeddings(self) -> torch.Tensor:
        """The word vectors, (V, d): W + W̃ (`output: "W+W~"`, paper §4.2) or W."""
        if self.config.output == "W+W~":
            return (self.W + self.W_context).detach()
        return self.W.detach().clone()

    def configure_optimizers(self, total_steps: int = 0) -> torch.optim.Optimizer:
        """AdaGrad with a constant η, as in the tool (`total_steps` is not needed). The model
        keeps it: `manual_step` updates with it, or with its accumulators (the kernel)."""
        opt = SparseAdagrad(self.parameters(), lr=self.config.lr, rule=self.config.adagrad)
        self._optimizer = opt
        return opt

    def __getstate__(self) -> dict:
        # a pickled model (MLflow's) holds the weights, not the optimizer kept above
        return {k: v for k, v in self.__dict__.items() if k != "_optimizer"}

    # ------------------------------------------------------------------------------ manual

    def optimizer(self) -> SparseAdagrad:
        """The optimizer of `configure_optimizers` (made now if it was not called)."""
        opt = self.__dict__.get("_optimizer")
        return opt if opt is not None else self.configure_optimizers()

    def accumulators(self) -> tuple[torch.Tensor, torch.Tensor]:
        """AdaGrad's G of [W | b] and [W̃ | b̃], (V, d+1) each: the optimizer's state, started at
        1 as SparseAdagrad starts it."""
        opt = self.optimizer()
        out = []
        for p in (self.word.weight, self.context.weight):
            state = opt.state[p]
            if "sum" not in state:
                state["sum"] = torch.ones_like(p, memory_format=torch.preserve_format)
            elif not state["sum"].is_contiguous():  # e.g. as loaded from a checkpoint
                state["sum"] = state["sum"].contiguous()
            out.append(state["sum"])
        return out[0], out[1]

    @torch.no_grad()
    def train_chunk(self, batch: dict) -> tuple[float, int]:
        """The numba path's step: the tool's per-entry AdaGrad over the entries batch["order"]
        names, in that order, with `config.threads` Hogwild threads, in place (weights and the
        optimizer's accumulators). Returns (Σ ½ f e², entries)."""
        from nlpzoo.models.glove_kernel import check_ids, train_order

        if self.word.weight.device.type != "cpu":
            raise ConfigError(
                "key 'backend': numba trains on the CPU; set backend: torch to train GloVe on "
                f"{self.word.weight.device.type}"
            )
        rows, cols, vals = batch["rows"].numpy(), batch["cols"].numpy(), batch["vals"].numpy()
        seen = (rows.ctypes.data, cols.ctypes.data, rows.size)
        if self.__dict__.get("_ids_checked") != seen:  # once per matrix
            check_ids(rows, cols, self.vocab_size)
            self._ids_checked = seen
        gword, gcontext = self.accumulators()
        c = self.config
        cost = train_order(
            self.word.weight.detach().numpy(),
            self.context.weight.detach().numpy(),
            gword.numpy(),
            gcontext.numpy(),
            rows,
            cols,
            vals,
            batch["order"].numpy(),
            c.x_max,
            c.alpha,
            c.lr,
            c.adagrad == "tool",
            c.threads,
        )
        return cost, int(batch["order"].numel())

    def manual_step(
        self, batch, progress: float = 0.0, progress_end: float | None = None
    ) -> tuple[float, int]:
        """The in-place update of one step, whichever loader made the batch; returns (Σ ½ f e²
        over its entries, entries), so the epoch's training loss Σ / Σ is the mean ½ f e² per
        entry on both paths. η is constant: `progress` is not used.

        A chunk (dict, numba): `train_chunk`. (inputs, targets) (torch): forward, backward and
        the optimizer's step on the mini-batch, as an automatic step would; the gradients are
        dropped afterwards, so the Lightning module's own step after this one changes nothing."""
        if isinstance(batch, dict):
            return self.train_chunk(batch)
        inputs, targets = batch
        opt = self.optimizer()
        opt.zero_grad(set_to_none=True)
        with torch.enable_grad():
            _, loss = self(inputs, targets)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        n = targets.numel()
        return float(loss.detach()) * n, n

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def cost(self, vocab_size: int) -> Cost:
        """Q = 2D per non-zero X_ij (the dot product w_i·w̃_j and its gradient): per entry of the
        co-occurrence matrix, not per token."""
        d = self.config.dim
        return Cost("2D per non-zero X_ij", f"D={d}", 2 * d, unit="entry")
