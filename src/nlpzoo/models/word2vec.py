"""Word2vec: CBOW and skip-gram (Mikolov, Chen, Corrado & Dean 2013a, "Efficient estimation of
word representations in vector space"; Mikolov, Sutskever, Chen, Corrado & Dean 2013b,
"Distributed representations of words and phrases and their compositionality").

Two log-linear models without a hidden non-linearity. Every word w has an input vector v_w (a row
of `W_in`, the word embedding) and the output layer has vectors u (rows of `W_out`). A batch is a
set of centre words w_t, each with its contexts C_t (the words within its dynamic window):

    CBOW        h = (1/|C_t|) Σ_{c ∈ C_t} v_c          predicts w_t          one pair per centre
    skip-gram   h = v_c for each c ∈ C_t               predicts w_t          |C_t| pairs per centre

Skip-gram's paper form predicts each context from the centre, p(w_{t+j} | w_t); like word2vec.c
and gensim we train the same pairs the other way round, h = v_{context} predicting the centre
(the set of pairs is symmetric). It is what makes hierarchical softmax cheap here: the centre's
tree path is then shared by all of its contexts, so its node vectors are read and written once
per centre, not once per pair.

Objective for one pair (h, target o) (2013b §2.1–2.2), σ the logistic function:

    negative sampling     ℓ = −log σ(u_o·h) − Σ_{k=1..K} log σ(−u_{n_k}·h),
                          n_k ~ P_n(w) ∝ count(w)^0.75 (`ns_exponent`), K = `negative`, drawn
                          afresh for every pair; one output vector per word (word2vec.c's
                          syn1neg), zero at start. A noise word equal to o is skipped (word2vec.c).
    hierarchical softmax  ℓ = −Σ_{n on path(o)} log σ((1 − 2 c_n)·u_n·h)
                          over the binary Huffman tree of the training counts (`huffman_tree` in
                          models/outputs.py, word2vec.c's CreateBinaryTree), c_n the code bit at
                          inner node n. Sign convention of word2vec.c: bit 0 has probability
                          σ(u_n·h) (its update is g = (1 − code − σ(u_n·h))·α), bit 1 σ(−u_n·h).
                          One vector per inner node (syn1), V − 1 of them, zero at start.

Both are J output rows u_j per pair with a sign z_j = ±1, or 0 for a row that does not count
(padding of a shorter path, a noise word equal to the target): ℓ = −Σ_j z_j²·log σ(z_j·u_j·h).

Symbols: V vocabulary, d = `dim`, B centres per batch, C = 2·window context slots per centre,
n present contexts in the batch (the skip-gram pairs), K noise words, L the batch's longest
Huffman path, J output rows per pair (K + 1 or L).

Two ways to train, chosen by `backend`:

    numba   (default; CPU, one process) `manual_step` on a chunk of the raw token stream
            (nlpzoo.data.word2vec.Word2VecChunks): the compiled kernel of
            nlpzoo.models.word2vec_kernel does word2vec.c's own procedure, one SGD step per pair
            with sub-sampling, dynamic window, noise words and the rate's decay inside it, on
            `threads` lock-free threads. Each Lightning step is one chunk (~200,000 tokens).
    torch   batches of `batch_size` centres (nlpzoo.data.word2vec.Word2VecPairs), one batched
            step per batch, as below. This is the path for DDP (several processes: the weights'
            gradients are all-reduced) and for GPUs; a run of several processes takes it
            whatever `backend` says.

Both are plain SGD on the rows a pair touches, as in the tool: the rate falls linearly from
`lr` towards 0 over the run and never below `lr·min_lr_ratio` (word2vec.c: alpha = starting_alpha
· (1 − words_done / (iter·train_words + 1)), floored at starting_alpha · 0.0001; gensim
interpolates to min_alpha instead). word2vec.c takes one step per pair; a batch takes the step of
its pairs' summed loss at the same per-pair rate, all computed from the weights at the start of
the batch. A row that many pairs of a batch touch (the tree's root: every pair; a frequent noise
word) takes the sum of their steps at once, so a batch must stay small enough for lr × (those
pairs) to be stable: large batches diverge with hierarchical softmax (Config.batch_size). Two
equivalent ways to take a batched step:

    autograd   `forward` returns loss = Σ_pairs ℓ / batch_size (the loss per centre word), with
               sparse gradients for the touched rows only; `configure_optimizers(total_steps)`
               gives SGD at rate lr·batch_size (so each pair moves at lr) with the linear decay.
    manual     `train_step(inputs, targets, lr)` computes the same gradients in closed form and
               adds them in place with `index_add_` (no autograd graph, no sparse tensors:
               1.5–3 times as fast on CPU). `lr_at(step, total_steps)` is the schedule.

CBOW's h is the mean of the contexts, but every context vector is moved by the whole ∂ℓ/∂h, not
the mean's gradient (1/|C_t|)·∂ℓ/∂h: so do word2vec.c and gensim (cbow_mean=1), and it matters (on
Brown the mean's gradient gave WordSim-353 ρ 0.16 against 0.20–0.23 after 5 epochs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.cost import Cost
from nlpzoo.errors import ConfigError
from nlpzoo.families.word2vec import Word2VecConfig
from nlpzoo.models.outputs import huffman_tree

FIRST_WORD = 4  # ids 0..3 are the specials <unk> <s> </s> <pad>: never targets or noise words

# centres per step when `batch_size` is null: measured on Brown (2 CPU cores) as the fastest size
# that is stable for the whole run at word2vec.c's rates (larger ones diverge with hierarchical
# softmax, whose root node is in every pair)


Config = Word2VecConfig  # the `word2vec` params section (nlpzoo.families)


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias method (Vose's construction): draw i uniform in 0..V−1 and u uniform in
    [0, 1); the sample is i if u < threshold[i], else alias[i]. Exact for any distribution p and
    O(1) per draw, where word2vec.c looks up a 10^8-entry table."""
    V = len(p)
    scaled = np.asarray(p, dtype=np.float64) * V / np.sum(p)
    threshold = np.ones(V)
    alias = np.arange(V)
    small = [i for i in range(V) if scaled[i] < 1.0]
    large = [i for i in range(V) if scaled[i] >= 1.0]
    while small and large:  # once per word when the model is built, never per token
        s, lg = small.pop(), large.pop()
        threshold[s], alias[s] = scaled[s], lg
        scaled[lg] -= 1.0 - scaled[s]
        (small if scaled[lg] < 1.0 else large).append(lg)
    return threshold, alias  # what is left keeps threshold 1 (rounding only)


class Word2Vec(nn.Module):
    """CBOW or skip-gram with negative sampling or hierarchical softmax; see the module doc.

    Batches (nlpzoo.data.word2vec.Word2VecPairs, the same for both models): inputs (B, C) the
    context ids of each centre, −1 where there is none; targets (B,) the centres. Or, for the
    numba kernel (`manual_step`), a chunk of the raw stream (Word2VecChunks).
    """

    def __init__(
        self, config: Config, vocab_size: int, counts: Sequence[int] | np.ndarray | None = None
    ) -> None:
        super().__init__()
        c = config
        if counts is None:
            raise ConfigError(
                f"key 'objective' {c.objective} needs the training count of every word (noise "
                "distribution / Huffman tree): construct the model with counts="
            )
        if len(counts) != vocab_size:
            raise ValueError(f"counts has {len(counts)} entries for a vocabulary of {vocab_size}")
        self.config, self.vocab_size = c, vocab_size
        self._counts = np.asarray(counts, dtype=np.int64).copy()
        self._tables = None  # the numba kernel's tables, built on its first step
        words = np.asarray(counts, dtype=np.float64).copy()
        words[:FIRST_WORD] = 0.0  # specials are never predicted
        if words.sum() <= 0:
            raise ValueError("counts: no word (id >= 4) has a positive training count")
        d = c.dim
        # syn0 uniform in [−s/d, s/d), s = init_scale (word2vec.c: 0.5); the output vectors zero
        # (at 0.5 the same floats as word2vec.c's (rand − 0.5) / d)
        self.W_in = nn.Parameter((torch.rand(vocab_size, d) - 0.5) * (2 * c.init_scale) / d)
        self.hierarchical = c.objective == "hierarchical"
        if self.hierarchical:
            tree = huffman_tree(words)  # specials (count 0) end deepest and are never reached
            self.W_out = nn.Parameter(torch.zeros(vocab_size - 1, d))  # (V−1, d) inner nodes
            self.register_buffer("points", torch.from_numpy(tree.points))  # (V, L) node ids
            self.register_buffer("codes", torch.from_numpy(tree.codes))  # (V, L) bits
            self.register_buffer("lengths", torch.from_numpy(tree.lengths))  # (V,)
            # z per path position: +1 for bit 0, −1 for bit 1, 0 past the leaf (not saved)
            L = tree.points.shape[1]
            z = (1.0 - 2.0 * tree.codes) * (np.arange(L) < tree.lengths[:, None])
            self.register_buffer("signs", torch.as_tensor(z, dtype=torch.float32), persistent=False)
        else:
            self.W_out = nn.Parameter(torch.zeros(vocab_size, d))  # (V, d) one per word
            noise = words**c.ns_exponent  # P_n(w) ∝ count^0.75 (2013b §2.2)
            threshold, alias = alias_table(noise)
            self.register_buffer("noise_probs", torch.as_tensor(noise / noise.sum()))  # (V,)
            self.register_buffer("noise_threshold", torch.as_tensor(threshold).float())
            self.register_buffer("noise_alias", torch.as_tensor(alias, dtype=torch.int64))

    # ------------------------------------------------------------------------------ the parts

    def sample_noise(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Noise words ~ count^0.75 (alias method, the global torch RNG), int64 of `shape`."""
        i = torch.randint(0, self.vocab_size, shape, device=self.W_in.device)
        u = torch.rand(shape, device=self.W_in.device)
        # take(): a flat gather, much faster on CPU than advanced indexing with a 2-D index
        return torch.where(u < self.noise_threshold.take(i), i, self.noise_alias.take(i))

    def contexts(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The present context ids (n,) in row-major order and the row (centre) of each (n,)."""
        present = inputs >= 0  # (B, C); −1 pads
        return inputs[present], present.nonzero(as_tuple=True)[0]

    def output_rows(
        self, targets: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The J output rows scored for each target: ids (P, J) into W_out and signs z (P, J),
        ±1 or 0 (does not count), so that ℓ = −Σ_j z_j²·log σ(z_j·u_j·h). `noise` (P, K) fixes
        the noise words (negative sampling); else they are drawn."""
        if self.hierarchical:
            lengths = self.lengths.index_select(0, targets)  # (P,)
            L = int(lengths.max()) if targets.numel() else 1  # the batch's longest path
            ids = self.points.index_select(0, targets)[:, :L]  # (P, L) inner nodes, root first
            return ids, self.signs.index_select(0, targets)[:, :L]  # bit 0: +1, bit 1: −1
        if noise is None:
            noise = self.sample_noise((targets.shape[0], self.config.negative))  # (P, K)
        ids = torch.cat([targets[:, None], noise], dim=1)  # (P, K+1): the target, then noise
        z = (noise != targets[:, None]).float().neg_()  # −1; 0 where noise == target (word2vec.c)
        return ids, torch.cat([torch.ones_like(z[:, :1]), z], dim=1)  # (P, K+1)

    # ------------------------------------------------------------------------------ autograd

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """CBOW's h (B, d): the mean of the present contexts, with sparse gradients; its value is
        the mean, the gradient reaching each context vector the whole ∂ℓ/∂h (module doc)."""
        ctx, rows = self.contexts(inputs)
        v = F.embedding(ctx, self.W_in, sparse=True)  # (n, d)
        total = v.new_zeros(inputs.shape[0], v.shape[1]).index_add(0, rows, v)  # (B, d) Σ v_c
        inv = 1.0 / (inputs >= 0).sum(1).clamp(min=1).to(v.dtype)  # (B,) 1/|C_t|
        return total - total.detach() + (total * inv[:, None]).detach()

    def forward(
        self, inputs: torch.Tensor, targets: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[None, torch.Tensor]:
        """inputs (B, C) context ids (−1: none), targets (B,) centres. `noise` fixes the noise
        words: (B, K) for CBOW, (n, K) for skip-gram (one row per present context, row-major).
        Returns (None, Σ_pairs ℓ / batch_size); the gradients are sparse."""
        if self.config.model == "cbow":
            h = self.hidden(inputs)[:, None, :]  # (B, 1, d): one pair per centre
            ids, z = self.output_rows(targets, noise)  # (B, J)
            z = z[:, None, :]  # (B, 1, J)
        elif not self.hierarchical:
            ctx, rows = self.contexts(inputs)
            h = F.embedding(ctx, self.W_in, sparse=True)[:, None, :]  # (n, 1, d): the pairs
            ids, z = self.output_rows(targets[rows], noise)  # (n, K+1)
            z = z[:, None, :]
        else:  # skip-gram, hierarchical: the centre's path is shared by its contexts
            ids, z = self.output_rows(targets)  # (B, L)
            z = z[:, None, :] * (inputs >= 0).float()[:, :, None]  # (B, C, L), 0: no context
            h = F.embedding(inputs.clamp(min=0), self.W_in, sparse=True)  # (B, C, d)
        u = F.embedding(ids, self.W_out, sparse=True)  # (·, J, d)
        s = z * torch.bmm(h, u.transpose(1, 2))  # (·, 1 or C, J) z_j·u_j·h
        loss = -(F.logsigmoid(s) * z * z).sum() / self.config.batch_size
        return None, loss

    def configure_optimizers(self, total_steps: int):
        """SGD at lr per pair (the loss is summed over pairs and divided by batch_size, hence
        lr·batch_size), decayed linearly per step as in word2vec.c."""
        c = self.config
        opt = torch.optim.SGD(self.parameters(), lr=c.lr * c.batch_size)
        total = max(int(total_steps), 1)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda t: max(1.0 - t / total, c.min_lr_ratio)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ------------------------------------------------------------------------------ manual

    def rate(self, progress: float) -> float:
        """word2vec.c's rate after `progress` (0..1) of the run: lr·max(1 − progress,
        min_lr_ratio)."""
        c = self.config
        return c.lr * max(1.0 - progress, c.min_lr_ratio)

    def lr_at(self, step: int, total_steps: int) -> float:
        """word2vec.c's rate at `step` of `total_steps`: lr·max(1 − step/total, min_lr_ratio)."""
        c = self.config
        return c.lr * max(1.0 - step / max(total_steps, 1), c.min_lr_ratio)

    @torch.no_grad()
    def train_step(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        lr: float,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One SGD step at rate `lr` per pair, in place and without autograd; returns `forward`'s
        loss before the step. The same update as SGD at lr·batch_size on that loss."""
        W_in, W_out = self.W_in, self.W_out
        d = W_in.shape[1]
        present = inputs >= 0  # (B, C)
        ctx, rows = inputs[present], present.nonzero(as_tuple=True)[0]  # (n,), (n,)
        # W.index_select(0, ids), not W[ids]: a several times faster row gather on CPU
        if self.config.model == "cbow":
            # the mean of the present contexts in one fused gather-and-sum (weights 1/|C_t|, 0)
            w = present / present.sum(1, keepdim=True).clamp(min=1)  # (B, C)
            h = F.embedding_bag(inputs.clamp(min=0), W_in, mode="sum", per_sample_weights=w)
            h = h[:, None, :]  # (B, 1, d)
            ids, z = self.output_rows(targets, noise)  # (B, J)
            z = z[:, None, :]  # (B, 1, J)
        elif not self.hierarchical:
            h = W_in.index_select(0, ctx)[:, None, :]  # (n, 1, d): one row per pair
            ids, z = self.output_rows(targets.index_select(0, rows), noise)  # (n, K+1)
            z = z[:, None, :]
        else:  # skip-gram, hierarchical: (B, C) contexts share the centre's L path nodes
            B, C = inputs.shape
            h = W_in.index_select(0, inputs.clamp(min=0).view(-1)).view(B, C, d)
            ids, z = self.output_rows(targets)  # (B, L)
            z = z[:, None, :] * present[:, :, None]  # (B, C, L), 0 where no context
        P, J = ids.shape
        u = W_out.index_select(0, ids.reshape(-1)).view(P, J, d)  # (P, J, d)
        s = z * torch.bmm(h, u.transpose(1, 2))  # (P, 1 or C, J) z_j·u_j·h
        loss = -(F.logsigmoid(s) * z * z).sum() / self.config.batch_size
        # ∂(−ℓ)/∂(u_j·h) = z·σ(−z·u_j·h) = word2vec.c's g = label − σ(u_j·h); times lr
        g = torch.sigmoid(s.neg_()).mul_(z).mul_(lr)  # (P, 1 or C, J)
        dh = torch.bmm(g, u)  # (P, 1 or C, d) = Σ_j g_j u_j, with the old u
        # (P, J, d) = Σ over the row's pairs of g_j h, with the old h; one pair per row is an
        # outer product, faster broadcast than with bmm
        gt = g.transpose(1, 2)  # (P, J, 1 or C)
        du = gt * h if h.shape[1] == 1 else torch.bmm(gt, h)
        # index_add_ sums the rows that repeat (a frequent word, the tree's root)
        W_out.index_add_(0, ids.reshape(-1), du.view(P * J, d))
        if self.config.model == "cbow":  # every context gets the whole dh, as in word2vec.c
            W_in.index_add_(0, ctx, dh.squeeze(1).index_select(0, rows))
        elif not self.hierarchical:
            W_in.index_add_(0, ctx, dh.squeeze(1))
        else:
            slots = present.view(-1).nonzero(as_tuple=True)[0]  # (n,) the present of B·C
            W_in.index_add_(0, ctx, dh.view(-1, d).index_select(0, slots))
        return loss

    # ------------------------------------------------------------------------------ kernel

    def kernel_tables(self):
        """What the numba kernel reads besides the weights (nlpzoo.models.word2vec_threads):
        word2vec.c's keep probabilities, and the Huffman tree or the noise alias table."""
        if self._tables is None:
            from nlpzoo.data.word2vec import keep_probability
            from nlpzoo.models.word2vec_threads import make_tables

            c = self.config
            words = self._counts.astype(np.float64)
            words[:FIRST_WORD] = 0.0
            tree = noise = None
            if self.hierarchical:
                tree = (self.points.numpy(), self.codes.numpy(), self.lengths.numpy())
            else:
                noise = alias_table(words**c.ns_exponent)
            p_keep = keep_probability(self._counts, c.sample)
            self._tables = make_tables(
                c.model, c.objective, c.window, c.negative, p_keep, tree, noise
            )
        return self._tables

    @torch.no_grad()
    def train_chunk(
        self, batch: dict, progress: float, progress_end: float
    ) -> tuple[torch.Tensor, int]:
        """The numba path's step: word2vec.c's per-pair SGD over one chunk of the raw stream
        (nlpzoo.data.word2vec.Word2VecChunks), in place, with `config.threads` Hogwild threads.

        The rate falls linearly across the chunk from rate(progress) to rate(progress_end) (per
        pair, as word2vec.c's falls with the words done), never below lr·min_lr_ratio. Returns
        the mean loss per (input, target) pair over the chunk and the number of pairs."""
        from nlpzoo.models.word2vec_threads import train_tokens

        if self.W_in.device.type != "cpu":
            raise ConfigError(
                "key 'backend': numba trains on the CPU; set backend: torch to train word2vec "
                f"on {self.W_in.device.type}"
            )
        c = self.config
        loss, pairs = train_tokens(
            batch["tokens"].numpy(),
            self.W_in.detach().numpy(),
            self.W_out.detach().numpy(),
            self.kernel_tables(),
            c.lr * (1.0 - progress),
            c.lr * (1.0 - progress_end),
            c.lr * c.min_lr_ratio,
            int(batch["seed"]),
            c.threads,
        )
        return torch.tensor(loss / max(pairs, 1)), pairs

    def manual_step(
        self, batch, progress: float, progress_end: float | None = None
    ) -> tuple[float, int]:
        """The in-place update of one step, whichever loader made the batch. `progress` is the
        fraction of the run done before the step, `progress_end` after it.

        A chunk of the stream (numba, `train_chunk`): the rate falls linearly from
        lr·(1 − progress) to lr·(1 − progress_end) across the chunk (constant at the first
        without `progress_end`); returns the loss summed over its pairs, and the pairs.
        (inputs, targets) (torch, `train_step`): the rate lr·(1 − progress); returns the loss per
        centre times the centres, and the centres. Either way the epoch's training loss is
        Σ loss / Σ count: the mean loss per pair (numba) or per centre (torch)."""
        if isinstance(batch, dict):
            end = progress if progress_end is None else progress_end
            loss, pairs = self.train_chunk(batch, progress, end)
            return float(loss) * pairs, pairs
        inputs, targets = batch
        n = targets.numel()
        return float(self.train_step(inputs, targets, self.rate(progress))) * n, n

    # ------------------------------------------------------------------------------ results

    def embeddings(self) -> torch.Tensor:
        """The input vectors W_in, (V, d): the word vectors the papers evaluate."""
        return self.W_in.detach()

    def cost(self, vocab_size: int) -> Cost:
        """Mikolov et al. (2013a)'s Q with this run's sizes: CBOW N×D + D×log₂V over N = 2C
        context words, skip-gram C×(D + D×log₂V); negative sampling has K + 1 for log₂V."""
        c = self.config
        d, window = c.dim, c.window
        if c.objective == "hierarchical":
            out, symbol, size = math.log2(vocab_size), "log₂V", f"V={vocab_size:,}"
        else:
            out, symbol, size = c.negative + 1, "(K+1)", f"K={c.negative}"
        if c.model == "cbow":
            n = 2 * window  # the context words on both sides
            return Cost(f"N×D + D×{symbol}", f"N={n}, D={d}, {size}", n * d + d * out)
        return Cost(f"C×(D + D×{symbol})", f"C={window}, D={d}, {size}", window * (d + d * out))
