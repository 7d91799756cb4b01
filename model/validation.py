"""The one evaluation loop of training runs: a model's mean loss over held-out batches.

``corpusforge train`` scores its fixed validation windows with it (the language-modelling
loss, every rank's share added up under DDP), ``corpusforge finetune`` its evaluation set
(the task loss, collecting predictions on the way). The model is put in evaluation mode
(no dropout) and back, no gradient is formed, and each batch's loss counts by the number
of examples in it, summed in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from model.distributed import Dist, all_sum


def mean_loss(model: torch.nn.Module, batches: Iterable, loss_of: Callable[[object], tuple[torch.Tensor, int]],
              device: torch.device | str | None = None, dist_info: Dist | None = None) -> float:
    """``sum(loss_b * n_b) / sum(n_b)`` over ``loss_of(batch) -> (mean loss, n)`` for every batch,
    over all processes of ``dist_info``; NaN when there is no example."""
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    with torch.no_grad():
        for batch in batches:
            loss, n = loss_of(batch)
            total[0] += loss.double() * n
            total[1] += n
    model.train(was_training)
    all_sum(total, dist_info)
    return float(total[0] / total[1]) if total[1] > 0 else math.nan
