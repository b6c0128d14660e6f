"""Greedy and beam-search decoding for every translation family, batched over sentences.

A family exposes (besides `forward`):

    START                                 the first decoder input (<s>; <sep> for decoder-only)
    start(src (B, S)) -> state            runs the encoder (or the prompt) once
    step(state, tokens (N,)) -> (log p (N, V), state)

`state` is any nest of dicts, lists and tuples of tensors whose first dimension is the row (other
leaves are shared by every row); rows are selected with `index_select` (`reorder`), never looking
inside: beam search reorders them after each step, and a sentence that is done leaves the batch,
so each step computes only the sentences still being decoded (`drop_finished`). A row's result
does not depend on the other rows, so this changes nothing but rounding: a matrix product may
round a row's last bits differently for another number of rows (a score moves by ~1e-7 relative;
only a tie that close between two hypotheses could go the other way).

Each sentence may produce at most `ratio · |source| + extra` pieces (the `</s>` included; extra
`EXTRA` unless given); at that length `</s>` is forced, so every hypothesis ends with `</s>`,
and `</s>` ends it.

Beam search keeps K live hypotheses per sentence. At each step the 2K best extensions are taken
(Σ log p over the hypothesis); those among the top K that end in `</s>` are finished and scored
by the length-normalised score of Wu et al. (2016), GNMT eq. 14:

    s(Y) = log P(Y | X) / lp(Y),   lp(Y) = ((5 + |Y|) / (5 + 1))^α      (α = 0: no normalisation)

and the K best extensions that do not end are kept alive. A sentence is done when it has K
finished hypotheses and its best live one, normalised at the current length, is worse than its
worst finished one. Finishing only among the top K (as fairseq does) makes beam 1 equal to
greedy search.

A caller with a time budget passes `check`, called before every step (and before each batch's
encoder): it raises to stop the decoding (`nlpzoo.use.limits.Deadline`). Without it nothing is
checked and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from nlpzoo.data.vocab import EOS, PAD

NEG_INF = float("-inf")
EXTRA = 10  # pieces a translation may have beyond ratio · |source|


@dataclass
class Hypotheses:
    """Per sentence, hypotheses best first: ids without `</s>`, their normalised scores and their
    log-probabilities (Σ log p including `</s>`)."""

    tokens: list[list[list[int]]]  # [sentence][rank] -> ids
    scores: torch.Tensor  # (B, K) length-normalised
    log_probs: torch.Tensor  # (B, K)

    def best(self) -> list[list[int]]:
        return [hyps[0] for hyps in self.tokens]


def length_penalty(length: torch.Tensor | int, alpha: float) -> torch.Tensor | float:
    """lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src: torch.Tensor, ratio: float, extra: int = EXTRA) -> torch.Tensor:
    """Longest output per sentence, `</s>` included: ⌈ratio · |source|⌉ + extra, (B,)."""
    n = (src != PAD).sum(1).double()
    return (torch.ceil(ratio * n) + extra).long()


def reorder(state, index: torch.Tensor):
    """Select rows `index` of every tensor in a nest of dicts / lists / tuples."""
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {k: reorder(v, index) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(reorder(v, index) for v in state)
    return state


def _force_eos(log_p: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
    """Rows where `force` (broadcastable to log_p[..., 0]) may only emit `</s>` now."""
    if not bool(force.any()):  # most steps: no row is at its limit
        return log_p
    only_eos = torch.full_like(log_p, NEG_INF)
    only_eos[..., EOS] = 0.0
    return torch.where(force[..., None], only_eos, log_p)


def _strip(ids: list[int]) -> list[int]:
    return ids[: ids.index(EOS)] if EOS in ids else ids


@torch.no_grad()
def greedy(
    model,
    src: torch.Tensor,
    max_len_ratio: float = 1.5,
    extra: int = EXTRA,
    drop_finished: bool = True,
    check: Callable[[], None] | None = None,
) -> Hypotheses:
    """The most likely next piece at every step, for a batch of sources (B, S).

    With `drop_finished` a sentence leaves the decoder's batch once it has emitted `</s>`
    (module doc); without, every row is stepped until all are done (same results, slower).
    `check`, when given, is called before the encoder and before every step (module doc)."""
    B, device = src.shape[0], src.device
    limit = max_lengths(src, max_len_ratio, extra).to(device)  # (B,), then per active row
    T_max = int(limit.max())
    if check is not None:
        check()
    state = model.start(src)
    tokens = torch.full((B,), model.START, dtype=torch.long, device=device)
    active = torch.arange(B, device=device)  # the sentence of each decoder row
    done = torch.zeros(B, dtype=torch.bool, device=device)  # per active row
    seqs = torch.full((B, T_max), EOS, dtype=torch.long, device=device)
    total = torch.zeros(B, dtype=torch.float64, device=device)
    for t in range(T_max):
        if check is not None:
            check()
        log_p, state = model.step(state, tokens)  # (N, V)
        log_p = _force_eos(log_p, t + 1 >= limit)
        tokens = log_p.argmax(-1)  # (N,)
        tokens = torch.where(done, torch.full_like(tokens, EOS), tokens)
        gain = torch.where(done, 0.0, log_p.gather(1, tokens[:, None])[:, 0].double())
        seqs[active, t] = tokens
        total[active] += gain
        done |= tokens == EOS
        if bool(done.all()):
            break
        if drop_finished and bool(done.any()):
            stay = (~done).nonzero()[:, 0]
            active, tokens, limit, done = active[stay], tokens[stay], limit[stay], done[stay]
            state = reorder(state, stay)
    return Hypotheses(
        tokens=[[_strip(s)] for s in seqs.tolist()],
        scores=total[:, None].float(),  # one hypothesis: nothing to normalise against
        log_probs=total[:, None].float(),
    )


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_len_ratio: float = 1.5,
    extra: int = EXTRA,
    drop_finished: bool = True,
    check: Callable[[], None] | None = None,
) -> Hypotheses:
    """K best translations per source (B, S), sorted by length-normalised score (module doc).

    With `drop_finished` a done sentence's K rows leave the decoder's batch (module doc).
    `check`, when given, is called before the encoder and before every step (module doc)."""
    B, K, device = src.shape[0], beam_size, src.device
    limit = max_lengths(src, max_len_ratio, extra).to(device)  # (B,), then per active sentence
    T_max = int(limit.max())
    if check is not None:
        check()
    state = reorder(model.start(src), torch.arange(B, device=device).repeat_interleave(K))
    tokens = torch.full((B * K,), model.START, dtype=torch.long, device=device)
    # live hypotheses: Σ log p (n, K); only beam 0 is live at first, so step 1 is not K copies
    alive = torch.full((B, K), NEG_INF, device=device)
    alive[:, 0] = 0.0
    alive_seq = torch.full((B, K, T_max), EOS, dtype=torch.long, device=device)
    fin_score = torch.full((B, K), NEG_INF, device=device)  # normalised, sorted descending
    fin_logp = torch.full((B, K), NEG_INF, device=device)
    fin_seq = torch.full((B, K, T_max), EOS, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    active = torch.arange(B, device=device)  # the sentence of each active row block
    out_score, out_logp, out_seq = fin_score.clone(), fin_logp.clone(), fin_seq.clone()
    for t in range(T_max):
        n = active.shape[0]  # sentences still in the batch; the decoder has n·K rows
        rows = torch.arange(n, device=device)[:, None]  # (n, 1)
        if check is not None:
            check()
        log_p, state = model.step(state, tokens)  # (n·K, V)
        V = log_p.shape[-1]
        log_p = _force_eos(log_p.view(n, K, V).float(), (t + 1 >= limit)[:, None].expand(n, K))
        cand = (alive[:, :, None] + log_p).view(n, K * V)  # Σ log p of every extension
        top, idx = cand.topk(2 * K, dim=1)  # (n, 2K), best first
        beam, token = idx // V, idx % V  # which live hypothesis, which piece
        seq = alive_seq[rows, beam]  # (n, 2K, T_max)
        seq[:, :, t] = token
        ends = token == EOS
        # finished: `</s>` among the top K extensions, sentence not done yet
        can_finish = ends & (torch.arange(2 * K, device=device) < K)[None] & ~done[:, None]
        norm = top / length_penalty(t + 1, alpha)
        new_fin = torch.where(can_finish, norm, torch.full_like(norm, NEG_INF))
        pool_score = torch.cat([fin_score, new_fin], 1)  # (n, 3K)
        pool_logp = torch.cat([fin_logp, top], 1)
        pool_seq = torch.cat([fin_seq, seq], 1)  # (n, 3K, T_max)
        # best K, sorted; stable, so equal scores keep their order (the earlier finished first)
        # and a done sentence's list no longer changes, whether or not its rows are still stepped
        fin_score, keep = pool_score.sort(dim=1, descending=True, stable=True)
        fin_score, keep = fin_score[:, :K], keep[:, :K]  # (n, K)
        fin_logp = pool_logp.gather(1, keep)
        fin_seq = pool_seq[rows, keep]
        # live: the K best extensions that do not end
        live = torch.where(ends, torch.full_like(top, NEG_INF), top)
        alive, pick = live.topk(K, dim=1)  # (n, K)
        alive_seq = seq[rows, pick]
        tokens = token.gather(1, pick)  # (n, K)
        parent = rows * K + beam.gather(1, pick)  # (n, K): the row each new hypothesis extends
        # done: K finished, and no live hypothesis can beat the worst of them (at this length)
        best_live = alive[:, 0] / length_penalty(t + 1, alpha)
        done |= (fin_score[:, -1] > NEG_INF) & (best_live <= fin_score[:, -1])
        done |= t + 1 >= limit
        if bool(done.all()):
            break
        if drop_finished and bool(done.any()):  # store the done sentences, step only the rest
            gone, stay = done.nonzero()[:, 0], (~done).nonzero()[:, 0]
            out_score[active[gone]] = fin_score[gone]
            out_logp[active[gone]] = fin_logp[gone]
            out_seq[active[gone]] = fin_seq[gone]
            active, limit, done, tokens = active[stay], limit[stay], done[stay], tokens[stay]
            alive, alive_seq, parent = alive[stay], alive_seq[stay], parent[stay]
            fin_score, fin_logp, fin_seq = fin_score[stay], fin_logp[stay], fin_seq[stay]
        tokens = tokens.reshape(-1)  # (n·K,)
        state = reorder(state, parent.reshape(-1))
    out_score[active], out_logp[active], out_seq[active] = fin_score, fin_logp, fin_seq
    return Hypotheses(
        tokens=[[_strip(h) for h in hyps] for hyps in out_seq.tolist()],
        scores=out_score,
        log_probs=out_logp,
    )


def translate_batches(
    model,
    sources: list,
    batch_size: int,
    beam_size: int,
    alpha: float,
    max_len_ratio: float,
    device: torch.device | str | None = None,
    drop_finished: bool = True,
    check: Callable[[], None] | None = None,
) -> list[list[int]]:
    """Best translation (ids) of every source (list of id arrays), in input order. Sentences are
    decoded in batches of similar length, on `device` (None: the model's); beam_size 1 uses
    greedy search; `check` goes to each (module doc)."""
    from nlpzoo.data.mt import pad

    if device is None:
        device = next(model.parameters()).device
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad([sources[i] for i in chunk], PAD).to(device)
        if beam_size == 1:
            hyps = greedy(model, src, max_len_ratio, drop_finished=drop_finished, check=check)
        else:
            hyps = beam_search(
                model,
                src,
                beam_size,
                alpha,
                max_len_ratio,
                drop_finished=drop_finished,
                check=check,
            )
        for i, ids in zip(chunk, hyps.best(), strict=True):
            out[i] = ids
    return out
