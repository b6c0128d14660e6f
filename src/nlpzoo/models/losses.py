"""The training loss of the translation families and the Transformer language model.

Label smoothing (Szegedy et al. 2016; Vaswani et al. 2017 §5.4): with ε = `smoothing`,

    loss = mean over labelled positions of (1 − ε)·(−log p_y) + ε·(1/V) Σ_v −log p_v

i.e. the cross-entropy against the target distribution (1 − ε)·onehot(y) + ε/V; ε = 0 is the
plain cross-entropy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def label_smoothed_loss(
    logits: torch.Tensor, labels: torch.Tensor, smoothing: float = 0.0, ignore_index: int = -100
) -> torch.Tensor:
    """Mean over the labelled positions of (1 − ε)·(−log p_y) + ε·(1/V) Σ_v −log p_v, i.e. the
    cross-entropy against (1 − ε)·onehot(y) + ε/V (§5.4; ε = `smoothing`, 0: plain
    cross-entropy). logits (..., V), labels (...) with `ignore_index` where there is no label."""
    return F.cross_entropy(
        logits.flatten(0, -2),
        labels.flatten(),
        ignore_index=ignore_index,
        label_smoothing=smoothing,
    )
