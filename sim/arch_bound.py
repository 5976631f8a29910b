"""The MAC utilization no schedule of a training step can beat on a configuration, from
its capacities and port widths alone (:func:`architecture_bound`).

:func:`sim.paper.schedule_bound` caps what reordering a compiled step's own events can
reach. This bound holds for any compiler: it counts only the events every schedule of
the method must have.

- **FPU.** Every useful multiply-add is an FMA in some PE, one per PE and cycle.
- **Scratchpad port.** A weight word not in the PE memories reaches a PE through the
  core's scratchpad, whose read and write ports move one beat of ``nr`` values a cycle
  each (an instruction has one stream input and one stream output, ``docs/core.md``); an
  updated word that leaves goes back through the write port. The chip's host streams
  (``host_width`` bits a cycle each way) could carry weights too: each core is given
  its share of them on top of its own port.
- **DRAM.** A word in neither the PE memories nor the scratchpad goes through the DMA
  engine, one transfer at a time, at most one beat a cycle and at most ``dram_gbps``
  (the host streams' share again on top).

How many words must move, per step and core, with ``W`` the core's share of the weights
(the mean over the cores, which the busiest core has at least), ``W'`` the same without
layer 0, and ``C`` the capacity of the tier (every word of every PE memory, then the
scratchpad too, given to weights; nothing for activations, buffers or padding):

- Every weight is updated once a step, so one that is ever outside the tier is stored
  at least once a step.
- **SGD and minibatch GD** (each weight is read forward, read backward, updated).
  Between the output layer's forward pass and its backward pass every weight waits for
  its next use (with a softmax, whose gradient needs every logit; an elementwise loss
  lets the output layer's pages through both passes at once, so its weights do not
  count), so at least ``W - C`` are outside the tier then: each is loaded again and
  stored. Layer 0's update can fuse with the next step's forward pass (page by page:
  its input is the next sample), and any layer's update may wait until its next forward
  use, but between the backward pass's reads of a layer ``l >= 1`` (which layer 0's
  update needs) and its next forward use lies layer 0's work: then every weight of the
  layers ``l >= 1`` waits, at least ``W' - C`` outside, each loaded once more. Loads at
  least ``(W - C) + (W' - C)``, stores the larger of the two terms (each at least 0).
- **CP**: every weight is used and updated every step, and at every moment at least
  ``W - C`` are outside: loads and stores at least ``W - C`` each.

The bound is ``MACs / (PEs x max(FPU cycles, load cycles, store cycles, DRAM cycles))``
with no host turnaround, padding, reduction, latency or conflict between the ports and
the kernels' bus traffic: a ceiling no compiler can pass, not a figure one can reach.
Where it binds it also says how wide the scratchpad port must be for a published
utilization (``port_words_needed``).
"""

from __future__ import annotations

__all__ = ["architecture_bound", "step_macs"]


def step_macs(sizes, method: str, batch: int = 1) -> int:
    """Useful multiply-adds of one training step of the MLP with layer widths ``sizes``:
    each weight forward and in its update, and backward (``W^T d``) for every layer but
    the first, ``batch`` times."""
    w = [a * b for a, b in zip(sizes[:-1], sizes[1:])]
    if method not in ("sgd", "cp", "mbgd"):
        raise ValueError(f"unknown training method {method!r} (sgd, cp, mbgd)")
    return batch * (2 * sum(w) + sum(w[1:]))


def _moves(method: str, W: float, W1: float, Wt: float, cap: float) -> tuple[float, float]:
    """``(loads, stores)``: words that must enter and leave a tier of ``cap`` words per
    step and core (module docstring); ``W`` the core's weights, ``W1`` those of layers 1
    and up, ``Wt`` those waiting at the turn from the forward to the backward pass."""
    if method == "cp":
        out = max(0.0, W - cap)
        return out, out
    turn, out1 = max(0.0, Wt - cap), max(0.0, W1 - cap)
    return turn + out1, max(turn, out1)


def architecture_bound(cfg, sizes, method: str, batch: int = 1, paper_util: float | None = None,
                       loss: str = "softmax_ce") -> dict:
    """The ceiling on MAC utilization of any schedule of one training step of the MLP
    with layer widths ``sizes`` on ``cfg`` (module docstring). ``loss``: with
    ``"softmax_ce"`` the output gradient needs every logit, so every weight waits at the
    turn from the forward to the backward pass; with ``"mse"`` it is elementwise, so the
    output layer may do both passes page by page and only the others wait.

    Returns ``bound`` (a fraction), ``binding`` (``"FPU"``, ``"scratchpad loads"``,
    ``"scratchpad stores"`` or ``"DRAM"``), ``cycles`` per resource (per core and step),
    the words that must move (``loads``, ``stores``, ``dram_words``), and with
    ``paper_util`` the scratchpad port width, in values a cycle each way, that
    utilization needs at least (``port_words_needed``; 0 when no weight has to move).
    A network that fits none of the configuration's tiers raises ValueError."""
    step_macs(sizes, method, batch)                  # checks the method
    w = [a * b for a, b in zip(sizes[:-1], sizes[1:])]
    cores, pes = cfg.cores, cfg.cores * cfg.nr * cfg.nr
    if loss not in ("softmax_ce", "mse"):
        raise ValueError(f"unknown loss {loss!r} (softmax_ce, mse)")
    W, W1 = sum(w) / cores, sum(w[1:]) / cores
    Wt = W if loss == "softmax_ce" else W - w[-1] / cores
    pe_words = cfg.nr * cfg.nr * (cfg.mem_a_words + cfg.mem_b_words)
    spad_words = cfg.spad_depth * cfg.nr
    dram_words = cfg.dram_depth * cfg.nr
    host = cfg.host_width / cfg.fmt.width / cores    # the core's share of a host stream, values a cycle
    macs = step_macs(sizes, method, batch)
    fpu = macs / pes
    loads, stores = _moves(method, W, W1, Wt, pe_words)
    if loads and not spad_words:
        raise ValueError(f"the weights ({W:,.0f} words per core) do not fit the PE memories ({pe_words:,} words) "
                         "and the configuration has no scratchpad")
    dl, ds = _moves(method, W, W1, Wt, pe_words + spad_words)
    if dl and not dram_words:
        raise ValueError(f"the weights ({W:,.0f} words per core) do not fit the PE memories and the scratchpad "
                         f"({pe_words + spad_words:,} words) and the configuration has no DRAM")
    if W > pe_words + spad_words + dram_words:
        raise ValueError(f"the weights ({W:,.0f} words per core) do not fit the PE memories, the scratchpad and "
                         f"the DRAM ({pe_words + spad_words + dram_words:,} words)")
    # the DMA engine: one transfer at a time, at most one beat a cycle, at most dram_gbps
    dma = min(cfg.nr, cfg.dram_gbps * 1e3 / cfg.clock_mhz / (cfg.fmt.width / 8)) if cfg.dram_mib else 0.0
    cycles = {"FPU": fpu, "scratchpad loads": loads / (cfg.nr + host), "scratchpad stores": stores / (cfg.nr + host),
              "DRAM": (dl + ds) / (dma + 2 * host) if dl else 0.0}
    binding = max(cycles, key=cycles.get)
    out = {"bound": fpu / cycles[binding], "binding": binding, "cycles": cycles, "macs": macs,
           "weights_per_core": W, "pe_words_per_core": pe_words, "loads": loads, "stores": stores,
           "dram_words": dl + ds}
    if paper_util is not None:
        out["port_words_needed"] = max(loads, stores) * paper_util / fpu
    return out
