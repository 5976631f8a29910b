"""What every trainer shares off the array: the compile error, the host's turnaround,
where a softmax loss's gradient is computed, and the host-side numerics (losses, the
softmax gradient, initial weights, a step's result), also used by the golden trainers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sw.mlp import MLP
from sw.softmax import softmax_supported
from arch.errors import InputError

__all__ = ["TrainCompileError", "HOST_LATENCY_CYCLES", "SOFTMAX_MODES", "resolve_softmax", "host_softmax_grad",
           "softmax_ce_loss", "mse_loss", "weight_bits", "init_weights", "one_hot", "StepResult"]

#: Assumed host turnaround for the softmax between the two RUNs of a ``softmax_ce`` step,
#: in core cycles (1 us at 1 GHz: unload the logits, softmax on the host, start the next
#: RUN with the gradient); counted as idle core cycles in every step's figures.
HOST_LATENCY_CYCLES = 1000


#: where a softmax_ce step computes softmax(z) - t: "array" (sw.softmax, one RUN),
#: "host" (between two RUNs, the turnaround counted), "auto" (the array when it can)
SOFTMAX_MODES = ("auto", "array", "host")


class TrainCompileError(InputError):
    """The network cannot be compiled for this configuration (memory, microcode, format)."""


def resolve_softmax(cfg, mlp: MLP, softmax: str = "auto", *, why_not: str | None = None) -> str | None:
    """Where the step computes a softmax loss's gradient: ``"array"`` or ``"host"`` (None
    for MSE). ``"auto"`` picks the array when :func:`sw.softmax.softmax_supported` allows
    it and the caller gives no reason against (``why_not``, e.g. logits spread over
    cores); an explicit ``"array"`` that cannot be raises :class:`TrainCompileError`."""
    if softmax not in SOFTMAX_MODES:
        raise TrainCompileError(f"softmax must be one of {', '.join(SOFTMAX_MODES)}, got {softmax!r}")
    if mlp.loss != "softmax_ce":
        return None
    why = why_not or softmax_supported(cfg, mlp.n_out)
    if softmax == "array" and why:
        raise TrainCompileError(f"softmax on the array is not possible here: {why}")
    if softmax == "auto":
        return "host" if why else "array"
    return softmax


def host_softmax_grad(fmt, logits_bits, t) -> np.ndarray:
    """``g = fmt(softmax(z) - t)``: ``z`` (bit patterns) to float64, a stable softmax in
    float64, minus the target (float64), one rounding to ``fmt``. Returns bit patterns."""
    z = fmt.to_float(np.asarray(logits_bits, dtype=fmt.np_uint))
    e = np.exp(z - np.max(z))
    p = e / e.sum()
    return fmt.from_float(p - np.asarray(t, dtype=np.float64)).astype(fmt.np_uint)


def softmax_ce_loss(z, t) -> float:
    """``-sum t log softmax(z)`` in float64 (``z``, ``t`` float arrays)."""
    z = np.asarray(z, dtype=np.float64)
    m = np.max(z)
    lse = m + np.log(np.sum(np.exp(z - m)))
    return float(-np.sum(np.asarray(t, dtype=np.float64) * (z - lse)))


def mse_loss(d) -> float:
    """``1/2 sum d^2`` in float64 (``d = y - t`` as floats)."""
    d = np.asarray(d, dtype=np.float64)
    return float(0.5 * np.sum(d * d))


def weight_bits(mlp: MLP, fmt, weights) -> list:
    """The global weights (``(m, n)`` per layer, bit patterns of ``fmt`` or floats) as
    bit patterns, checked: ``ValueError`` for a wrong count or shape."""
    if len(weights) != mlp.n_layers:
        raise ValueError(f"expected {mlp.n_layers} weight matrices, got {len(weights)}")
    out = []
    for l, W in enumerate(weights):
        W = np.asarray(W)
        if W.shape != mlp.shape(l):
            raise ValueError(f"W{l} must be {mlp.shape(l)}, got {W.shape}")
        out.append(W if W.dtype == fmt.np_uint else fmt.from_float(W.astype(np.float64)).astype(fmt.np_uint))
    return out


def init_weights(mlp: MLP, fmt, seed: int = 0) -> list:
    """He-uniform initial weights ``U(-sqrt(6/fan_in), +sqrt(6/fan_in))`` rounded to
    ``fmt``: a list of global ``(n_out, n_in)`` bit-pattern matrices."""
    rng = np.random.default_rng(seed)
    out = []
    for l in range(mlp.n_layers):
        m, n = mlp.shape(l)
        s = np.sqrt(6.0 / n)
        out.append(fmt.from_float(rng.uniform(-s, s, size=(m, n))).astype(fmt.np_uint))
    return out


def one_hot(n: int, c: int) -> np.ndarray:
    t = np.zeros(n)
    t[int(c)] = 1.0
    return t


@dataclass
class StepResult:
    loss: float                   #: the sample's loss (float64, from what was unloaded)
    output: np.ndarray            #: the network output z (MSE: d + t) as floats
    counters: list                #: counters of each RUN
    cycles: int                   #: cycles of the step: its RUNs and the microcode LOADs before them
    host_cycles: int              #: assumed host turnaround cycles (softmax), 0 for MSE
    raw: dict = field(default_factory=dict)   #: unloaded bit patterns by name
    #: host stream cycles of the step's microcode LOADs (in ``cycles``)
    load_cycles: int = 0
