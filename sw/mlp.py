"""A multilayer perceptron to train on the array: a frozen, validated description.

``MLP(sizes=(64, 64, 10), loss="softmax_ce", lr=0.05)`` is a fully connected network
``sizes[0] -> sizes[1] -> ... -> sizes[-1]`` with ReLU on every hidden layer and an
identity output layer followed by the loss:

``"mse"``         ``L = 1/2 * sum_i (y_i - t_i)^2`` (summed over the outputs, not averaged:
                  its gradient is ``y - t`` with no scaling, which the array computes
                  with one ``axpy``; an average would scale the learning rate by
                  ``1 / n_out`` and can be had by passing ``lr / n_out``)
``"softmax_ce"``  ``L = -log softmax(y)_c`` for a target class ``c`` (or a probability
                  vector ``t``: ``-sum t_i log softmax(y)_i``); gradient
                  ``softmax(y) - t``

No biases (as in the reference design's kernels; a bias is a weight on a constant input
and can be had by appending a 1 to every input). ``batch`` is the minibatch size; only
1 (SGD) is compiled for now (:mod:`sw.train`).

Every field is checked at construction; a bad one raises :class:`MLPError` naming it and
its allowed values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from arch.errors import InputError

__all__ = ["MLP", "MLPError", "LOSSES"]

LOSSES = ("mse", "softmax_ce")


class MLPError(InputError):
    """An MLP description is invalid."""


@dataclass(frozen=True)
class MLP:
    """Layer sizes (inputs first), loss, learning rate, batch size.

    Parameters
    ----------
    sizes : sequence of int
        ``(n_in, n_hidden..., n_out)``, at least two entries, each in ``1 .. 65535``.
    loss : ``"mse"`` or ``"softmax_ce"``
    lr : float
        Learning rate ``> 0`` (the array stores ``-lr`` rounded to its format; it must not
        round to zero or overflow there, which :func:`sw.train.compile_sgd` checks).
    batch : int
        Minibatch size; 1 (SGD) is the only one compiled so far.
    """

    sizes: tuple
    loss: str = "mse"
    lr: float = 0.01
    batch: int = 1

    def __post_init__(self):
        try:
            sizes = tuple(self.sizes)
        except TypeError:
            raise MLPError(f"MLP.sizes must be a sequence of layer sizes, got {self.sizes!r}") from None
        if len(sizes) < 2:
            raise MLPError(f"MLP.sizes needs at least an input and an output size, got {sizes!r}")
        for i, s in enumerate(sizes):
            if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 65535:
                raise MLPError(f"MLP.sizes[{i}] must be an integer in 1..65535, got {s!r}")
        object.__setattr__(self, "sizes", sizes)
        if self.loss not in LOSSES:
            raise MLPError(f"MLP.loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.loss == "softmax_ce" and sizes[-1] < 2:
            raise MLPError(f"MLP.loss 'softmax_ce' needs at least 2 outputs, got {sizes[-1]}")
        lr = self.lr
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
            raise MLPError(f"MLP.lr must be a finite number > 0, got {lr!r}")
        object.__setattr__(self, "lr", float(lr))
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise MLPError(f"MLP.batch must be an integer >= 1, got {self.batch!r}")

    # -- derived -------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Weight layers (``len(sizes) - 1``)."""
        return len(self.sizes) - 1

    @property
    def n_in(self) -> int:
        return self.sizes[0]

    @property
    def n_out(self) -> int:
        return self.sizes[-1]

    def shape(self, layer: int) -> tuple:
        """``(n_out, n_in)`` of weight matrix ``layer`` (0-based)."""
        return self.sizes[layer + 1], self.sizes[layer]

    @property
    def n_weights(self) -> int:
        return sum(a * b for a, b in zip(self.sizes[1:], self.sizes[:-1]))

    def macs_per_sample(self) -> int:
        """Multiply-adds of one SGD step: forward ``W x``, backward ``W^T d`` (all layers
        but the first) and the rank-1 update of every layer."""
        fwd = self.n_weights
        bwd = sum(a * b for a, b in zip(self.sizes[2:], self.sizes[1:-1]))
        return fwd + bwd + fwd

    def flops_per_step(self) -> int:
        """FLOPs of one SGD step's mathematics: 2 per multiply-add of
        :meth:`macs_per_sample` (the ReLUs, masks and the loss gradient are not counted)."""
        return 2 * self.macs_per_sample() * self.batch

    def describe(self) -> str:
        return f"{'-'.join(map(str, self.sizes))} ({self.loss}, lr {self.lr:g}, batch {self.batch})"
