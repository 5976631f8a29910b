"""Compile an MLP into an SGD training step for one core, and run it from the host.

``compile_sgd(cfg, mlp) -> TrainProgram`` maps batch-1 SGD of an :class:`sw.mlp.MLP`
onto one ``nr x nr`` core in three steps, each replaceable when the chip ring,
minibatch and continuous propagation come:

1. **mapping** (:func:`map_layers`): which resources hold each layer; on one core every
   layer is the whole core and the choice is the SRAM bank of each weight matrix (all in
   MEM A when they fit, else balanced over both banks);
2. **memory allocation** (:class:`Allocator`): a region of one bank, at the same address
   in every PE, for every weight matrix, activation, delta, broadcast copy and scalar,
   honouring the kernels' bank rules (a GEMV's ``x`` and ``x_copy`` and a rank-1's ``v``
   not in the bank of their ``W``; elementwise operands in different banks where that
   halves their cost); a network that does not fit fails with
   :class:`TrainCompileError` giving every size;
3. **per-method emitter** (:func:`_sgd_ops`): the ordered kernel calls of one step
   (forward GEMVs with ReLU, the loss gradient, backward transposed GEMVs with ReLU
   masks, rank-1 weight updates; per layer, :func:`backward_plan` may fuse a layer's
   transposed GEMV and update into one :func:`sw.kernels.emit_gemv_t_rank1`), then :func:`_split_ops` puts them into as few
   microprograms as the microcode holds, with the NOPs the pipeline needs between two
   kernels (:func:`kernel_gap`) and a program boundary wherever the host must compute
   (softmax).

The step for ``loss="mse"`` is one microprogram (one RUN): load ``x`` and ``t`` from the
host stream, forward, ``d = z_L - t`` (``axpy`` with ``alpha = -1``), backward and the
weight updates, unload ``d`` (the host computes the loss from it). For
``"softmax_ce"`` with ``softmax="array"`` (the default when the kernel fits: 
:func:`resolve_softmax`) it is one RUN too: ``g = softmax(z) - t`` is computed on the
array by :func:`sw.softmax.emit_softmax_grad`, and the logits are unloaded at the end
for the host's loss. With ``softmax="host"`` it is two: (1) load ``x``, forward, unload
the logits; the host computes ``g = softmax(z) - t`` in float64, rounds it to the
format, and (2) loads ``g``, runs the backward pass and the updates. The host's
turnaround between the two RUNs is not simulated; it is counted as
:data:`HOST_LATENCY_CYCLES` idle core cycles per step (see ``docs/training.md``).

Host side: :meth:`TrainProgram.init_phases` loads the initial weights and scalars,
:meth:`TrainProgram.run_step` runs one step on a :class:`sim.sessions.CoreSession` (the fast model
or the core model, interactively; the session records every phase so that the same
host stream can be replayed on the RTL with :func:`sim.core_run.run_session`),
:meth:`TrainProgram.weights_from_session` / :meth:`TrainProgram.unload_weights_phases`
read the weights back. :mod:`sw.golden_train` is the bit-exact numpy model of the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sw.collectives import Frag, Region
from sw.asm import Builder, cdrv, hin, hout
from sw.kernels import (Scalar, elementwise_cost, emit_axpy, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu,
                        emit_relu_mask, gemv_cost, gemv_t_rank1_cost, rank1_cost)
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.softmax import emit_softmax_grad, softmax_pen, softmax_plan, softmax_size, softmax_supported, softmax_table

__all__ = ["TrainCompileError", "TrainProgram", "compile_sgd", "map_layers", "Allocator",
           "StepResult", "kernel_gap", "HOST_LATENCY_CYCLES", "host_softmax_grad", "init_weights",
           "softmax_ce_loss", "mse_loss", "backward_plan", "backward_costs", "FUSED_TOLERANCE",
           "resolve_softmax", "SOFTMAX_MODES"]

#: Assumed host turnaround for the softmax between the two RUNs of a ``softmax_ce`` step,
#: in core cycles (1 us at 1 GHz: unload the logits, softmax on the host, start the next
#: RUN with the gradient); counted as idle core cycles in every step's figures.
HOST_LATENCY_CYCLES = 1000


#: where a softmax_ce step computes softmax(z) - t: "array" (sw.softmax, one RUN),
#: "host" (between two RUNs, the turnaround counted), "auto" (the array when it can)
SOFTMAX_MODES = ("auto", "array", "host")


class TrainCompileError(ValueError):
    """The network cannot be compiled for this configuration (memory, microcode, format)."""


# ======================================================================================
# host-side numerics (shared by the array run and the golden trainer)
# ======================================================================================
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


# ======================================================================================
# 1. mapping
# ======================================================================================
def map_layers(cfg, mlp: MLP, policy: str = "auto") -> list:
    """The SRAM bank of each weight matrix on one core: ``"a"`` for all (``policy="a"``),
    or balanced (``"balanced"``: largest first into the bank with more free words).
    ``"auto"`` returns all-in-A; :func:`compile_sgd` then tries ``"balanced"`` and, for up
    to 10 layers, every other assignment, when the previous one does not fit."""
    nr = cfg.nr
    words = [local_len(m, nr) * local_len(n, nr) for m, n in (mlp.shape(l) for l in range(mlp.n_layers))]
    if policy in ("a", "auto"):
        return ["a"] * mlp.n_layers
    if policy != "balanced":
        raise TrainCompileError(f"unknown mapping policy {policy!r}; allowed: auto, a, balanced")
    free = {"a": cfg.mem_a_words, "b": cfg.mem_b_words}
    banks = [None] * mlp.n_layers
    for l in sorted(range(mlp.n_layers), key=lambda i: -words[i]):
        bk = max(("a", "b"), key=lambda k: (free[k], k == "a"))
        banks[l] = bk
        free[bk] -= words[l]
    return banks


#: The fused backward step is chosen for a layer when its cycles (with the ReLU mask it
#: forces into one bank) are at most this fraction above the separate kernels': it reads
#: and writes each weight once for two MACs, saving SRAM energy. Measured on 4x4
#: binary16 (docs/training.md): 128x128 +2.1 % layer cycles for -10 % step energy,
#: 64x64 +4.2 % for -7 %; the 10-output layers +15-30 % for no energy gain.
FUSED_TOLERANCE = 0.05


def backward_costs(cfg, mlp: MLP, l: int, shape: tuple | None = None) -> dict:
    """Instructions of layer ``l``'s (``l >= 1``) backward step and update, both ways:
    ``separate`` = GEMV^T + ReLU mask (operands in two banks) + rank-1, ``fused`` =
    :func:`sw.kernels.gemv_t_rank1_cost` + ReLU mask (``e`` and ``a`` in one bank: two
    instructions per element). Inter-kernel NOPs are not included. ``shape``: the
    ``(m, n)`` the kernels run on (default the layer's; a chip program's: its panel)."""
    m, n = mlp.shape(l) if shape is None else shape
    k = local_len(n, cfg.nr)
    sep = gemv_cost(cfg, m, n, trans=True)["instructions"] + rank1_cost(cfg, m, n)["instructions"] \
        + elementwise_cost("relu_mask", k)
    fus = gemv_t_rank1_cost(cfg, m, n)["instructions"] + elementwise_cost("relu_mask", k, two_banks=False)
    return {"separate": sep, "fused": fus}


def backward_plan(cfg, mlp: MLP, backward: str = "auto", tolerance: float = FUSED_TOLERANCE,
                  shapes: list | None = None) -> list:
    """Per layer, whether its backward step is the fused kernel (``emit_gemv_t_rank1``):
    never for layer 0 (no ``W^T d`` needed: rank-1 alone); for ``l >= 1`` always
    (``backward="fused"``), never (``"separate"``) or (``"auto"``) when
    ``fused <= (1 + tolerance) * separate`` in :func:`backward_costs` (at ``shapes[l]``
    when given)."""
    if backward not in ("auto", "fused", "separate"):
        raise TrainCompileError(f"unknown backward {backward!r}; allowed: auto, fused, separate")
    out = [False]
    for l in range(1, mlp.n_layers):
        if backward == "auto":
            c = backward_costs(cfg, mlp, l, None if shapes is None else shapes[l])
            out.append(c["fused"] <= (1 + tolerance) * c["separate"])
        else:
            out.append(backward == "fused")
    return out


# ======================================================================================
# 2. memory allocation
# ======================================================================================
def _other(bank):
    return "b" if bank == "a" else "a"


@dataclass
class Alloc:
    name: str
    region: Region
    words: int
    what: str


class Allocator:
    """Bump allocation of named regions in banks A and B (the same addresses on every
    PE). Allocation never fails; :meth:`fits` tells whether both banks hold what was
    allocated (the compiler then tries another mapping or reports the sizes)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.next = {"a": 0, "b": 0}
        self.items: dict = {}

    def depth(self, bank):
        return self.cfg.mem_a_words if bank == "a" else self.cfg.mem_b_words

    def alloc(self, name: str, words: int, what: str, *, bank: str | None = None, forbid=(), prefer=None):
        """Allocate ``words`` words for ``name``: in ``bank``, or in an allowed bank
        (not in ``forbid``), ``prefer`` first when allowed, else the one with more room."""
        if bank is None:
            allowed = [b for b in ("a", "b") if b not in forbid]
            if prefer in allowed and self.next[prefer] + words <= self.depth(prefer):
                bank = prefer
            else:
                bank = max(allowed, key=lambda b: (self.depth(b) - self.next[b], b == "a"))
        r = Region(bank, self.next[bank])
        self.next[bank] += words
        self.items[name] = Alloc(name, r, words, what)
        return r

    def used(self, bank):
        return self.next[bank]

    def fits(self):
        return all(self.next[b] <= self.depth(b) for b in ("a", "b"))

    def table(self) -> str:
        lines = [f"{'name':<10} {'bank':<4} {'base':>6} {'words':>6}  what"]
        for it in sorted(self.items.values(), key=lambda i: (i.region.bank, i.region.base)):
            lines.append(f"{it.name:<10} {it.region.bank.upper():<4} {it.region.base:>6} {it.words:>6}  {it.what}")
        for b in ("a", "b"):
            lines.append(f"MEM {b.upper()}: {self.next[b]} of {self.depth(b)} words used")
        return "\n".join(lines)


def _allocate(cfg, mlp: MLP, wbanks: list, fused: list | None = None, softmax: str | None = None) -> Allocator:
    """All regions of one SGD step (see ``docs/training.md``, memory map); ``fused[l]``:
    layer ``l``'s backward step is the fused kernel (its ``e`` not in ``W_l``'s bank, no
    rows copy ``dc`` of its ``d``)."""
    fused = fused or [False] * mlp.n_layers
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    S, nl = mlp.sizes, mlp.n_layers
    al = Allocator(cfg)
    for l in range(nl):
        m, n = mlp.shape(l)
        al.alloc(f"W{l}", L(m) * L(n), f"weights of layer {l} ({m} x {n}, 2D round-robin)", bank=wbanks[l])
    al.alloc("x", L(S[0]), "input sample (cols layout, loaded per step)", forbid={wbanks[0]})
    for i in range(1, nl + 1):
        hidden = i < nl
        # z_i: GEMV output (rows); hidden: ReLU in place -> a_i, read by layer i from the diagonal
        forbid = {wbanks[i]} if hidden else {wbanks[nl - 1]}
        al.alloc(f"z{i}", L(S[i]), "activation a = relu(z) (rows layout, ReLU in place)" if hidden
                 else "output z (rows); MSE: d = z - t in place", forbid=forbid)
        if hidden:
            al.alloc(f"c{i}", L(S[i]) + 1, f"cols copy of a{i} (GEMV broadcast; rank-1 v)", forbid={wbanks[i]})
    if mlp.loss == "mse":
        zb = al.items[f"z{nl}"].region.bank
        al.alloc("t", L(S[nl]), "target (rows layout, loaded per step)", bank=_other(zb))
        al.alloc("m1", 1, "scalar -1 (every PE)")
    elif softmax == "array":
        alloc_softmax(al, cfg, S[nl], L(S[nl]), {wbanks[nl - 1]}, "rows, computed on the array",
                      "rows layout, loaded per step")
    else:
        al.alloc("g", L(S[nl]), "output gradient softmax(z) - t (rows, loaded per step)", forbid={wbanks[nl - 1]})
    for i in range(nl - 1, 0, -1):
        # backward into hidden layer i: e_i = W_i^T d_{i+1} (cols), dm_i = mask(e_i, a_i) (diag)
        ab = al.items[f"z{i}"].region.bank
        # the fused kernel stores e (its y) while W's write port carries the updates: e not
        # in W_i's bank, hence (z_i is not there either) in a_i's bank: the mask then
        # takes two instructions per element
        al.alloc(f"e{i}", L(S[i]), f"W{i}^T d{i + 1} (cols layout)", prefer=_other(ab),
                 forbid={wbanks[i]} if fused[i] else ())
        al.alloc(f"dm{i}", L(S[i]), f"delta of layer {i}: e{i} * relu'(a{i}) (diag)", forbid={wbanks[i - 1]})
        if i + 1 < nl and not fused[i]:
            al.alloc(f"dc{i + 1}", L(S[i + 1]) + 1, f"rows copy of dm{i + 1} (transposed-GEMV broadcast)",
                     forbid={wbanks[i]})
    al.alloc("nlr", 1, "scalar -lr (every PE)")
    return al


def alloc_softmax(al: Allocator, cfg, n: int, words: int, forbid, g_where: str, t_where: str) -> None:
    """The regions of the softmax kernel (``n`` outputs, ``words`` per PE): ``g`` (not in
    ``forbid``), ``t`` in the other bank, the constant table (one copy per bank) and the
    penalty words."""
    g = al.alloc("g", words, f"output gradient softmax(z) - t ({g_where})", forbid=forbid)
    al.alloc("t", words, f"target ({t_where})", bank=_other(g.bank))
    p = softmax_plan(cfg, n)
    al.alloc("smx_ka", p.table_words, "softmax constants (every PE)", bank="a")
    al.alloc("smx_kb", p.table_words, "softmax constants (every PE)", bank="b")
    al.alloc("smx_pen", p.passes, "softmax padding penalties (per PE)")


def softmax_const_items(cfg, regions: dict, n: int) -> list:
    """``(Region, local)`` loads of the softmax kernel's constants (init phases)."""
    nr = cfg.nr
    tab = softmax_table(cfg, n)
    tl = np.ascontiguousarray(np.broadcast_to(tab, (nr, nr, len(tab))))
    return [(regions["smx_ka"], tl), (regions["smx_kb"], tl), (regions["smx_pen"], softmax_pen(cfg, n))]


def softmax_op(cfg, regions: dict, alloc: Allocator, n: int, z: Region, name: str = "softmax", *,
               z_layout: str = "rows", core: int | None = None) -> "Op":
    """The :class:`Op` of :func:`sw.softmax.emit_softmax_grad`: ``g = softmax(z) - t``.
    ``core`` (chip programs): the kernel runs on core 0; the other cores issue as many
    NOPs (a loop), so the cores stay in step."""
    idle = core is not None and core != 0
    w = local_len(n, cfg.nr)
    R = regions
    tw = alloc.items["smx_ka"].words

    def emit(b):
        if not idle:
            return emit_softmax_grad(b, cfg, n, z, R["t"], R["g"], R["smx_ka"], R["smx_kb"], R["smx_pen"],
                                     z_layout=z_layout, name="smx").instructions
        ins = softmax_size(cfg, n)[1]
        f = Frag()
        f.open_loop(f.ins(), "smxi", ins - 1, 0)
        f.ins()
        f.close_loop()
        f.emit(b)
        return ins

    return Op(name, "softmax", emit,
              reads=[(z, w), (R["t"], w), (R["smx_ka"], tw), (R["smx_kb"], tw),
                     (R["smx_pen"], alloc.items["smx_pen"].words)],
              writes=[(R["g"], w)], fma_wb=True, stores=False, per_core=core is not None)


# ======================================================================================
# 3. the per-method emitter: the ops of one step
# ======================================================================================
@dataclass
class Op:
    """One kernel call (or host transfer) of a step."""

    name: str
    kind: str                         #: gemv, gemv_t, relu, relu_mask, axpy, rank1, load, unload, host
    emit: object = None               #: emit(builder) -> instructions issued
    reads: list = field(default_factory=list)     #: [(Region, words)]
    writes: list = field(default_factory=list)    #: [(Region, words)]
    fma_wb: bool = False              #: writes SRAM with FMA write-backs (may leave them in flight at its end)
    stores: bool = True               #: writes SRAM with operand-stage stores (else only FMA write-backs)
    data: str | None = None           #: load: the host vector it consumes; unload: what it returns
    words: int = 0                    #: load/unload: words per PE
    wb: list | None = None            #: the regions written by FMA write-backs (None: all ``writes`` if fma_wb)
    wb_tail: int = 0                  #: instructions issued after its last SRAM-writing FMA
    per_core: bool = False            #: chip programs: assembles differently on different cores
    info: dict = field(default_factory=dict)      #: what a combined op holds (e.g. rows of a merged update)

    def wb_regions(self) -> list:
        if not self.fma_wb:
            return []
        return list(self.writes) if self.wb is None else list(self.wb)

    def store_regions(self) -> list:
        if not self.stores:
            return []
        wb = self.wb_regions()
        return [w for w in self.writes if w not in wb]


def _overlap(r1, n1, r2, n2):
    return r1.bank == r2.bank and r1.base < r2.base + n2 and r2.base < r1.base + n1


def kernel_gap(cfg, a: Op, b: Op) -> int:
    """NOPs needed between the last instruction of ``a`` and the first of ``b``.

    * ``a`` writes SRAM with FMAs (axpy, rank-1, the fused backward step's ``W``): the
      last one, issued ``a.wb_tail`` instructions before ``a``'s end (0 for axpy and
      rank-1, whose last instruction is that FMA; at least ``fpu_latency`` for the fused
      kernel, whose reduction and moves follow its last update), is written at the end
      of cycle ``t + fpu_latency - 1`` (``t`` its issue); ``b`` must not read what ``a``
      wrote before then, nor store into that bank when it lands (the write-back would
      drop the store): ``fpu_latency - 1 - wb_tail`` NOPs (if positive) when ``b`` reads
      an overlapping region or stores into a bank ``a`` writes back to (``b``'s own FMA
      write-backs cannot collide: one FMA issues per cycle, all with the same latency).
    * ``a`` stores (a store issued at ``t`` is readable from ``t +
      cfg.sram_read_distance``, ``t + 2`` but with the receive stage; conservatively
      ``a``'s last instruction): ``sram_read_distance - 1`` NOPs when ``b`` reads an
      overlapping region (the fused kernel's ``y`` moves are its last instructions).
    * Otherwise none: no kernel leaves register writes in flight (their last FMAs are
      read by their own final instructions).
    """
    def hit(ws):
        return any(_overlap(wr, wn, rr, rn) for wr, wn in ws for rr, rn in b.reads)

    gap = 0
    wb = a.wb_regions()
    if wb:
        need = max(0, cfg.fpu_latency - 1 - a.wb_tail)
        banks = {wr.bank for wr, _ in wb}
        if need and (hit(wb) or any(r.bank in banks for r, _ in b.store_regions())):
            gap = need
    if hit(a.store_regions()):
        gap = max(gap, cfg.sram_read_distance - 1)
    return gap


def _elements(b, n, elem, name, agu="g0"):
    """``n`` one-instruction elements, exactly ``n`` instructions: the first three carry
    the AGU setup and the loop instruction (immediate addresses), the rest run in a
    zero-overhead loop (``elem(i, agu)`` -> slots, ``agu`` None for immediates)."""
    if n < 4:
        for i in range(n):
            b.emit(*elem(i, None))
        return n
    b.agu_base(agu, 0, *elem(0, None))
    b.agu_stride(agu, name, 1, *elem(1, None))
    with b.loop(name, n - 3, *elem(2, None)):
        b.emit(*elem(3, agu))
    return n


def emit_load_vector(b, cfg, reg: Region, n: int, layout: str, name: str) -> int:
    """Load a vector of ``n`` local words per PE in the ``cols`` layout (``hin col``:
    lane ``c`` on column bus ``c``, written by every PE) or the ``rows`` layout (``hin
    row``): one beat and one instruction per local word (``nr`` times fewer than
    :func:`sw.transfer.emit_load`, which writes one PE column per beat). Beats:
    :func:`vector_beats`. Returns the instruction count (``n``)."""
    reg = reg.bind(cfg)
    bus = "col" if layout == "cols" else "row"
    return _elements(b, n, lambda i, agu: [hin(bus), reg.wr(bus, i, agu=agu)], name)


def vector_beats(cfg, v_bits, n_words: int) -> list:
    """Host beats of :func:`emit_load_vector` for the (global) vector ``v_bits``: beat
    ``k`` lane ``q`` = ``v[k * nr + q]`` (zero padding)."""
    nr, w = cfg.nr, cfg.fmt.width
    pad = np.zeros(n_words * nr, dtype=np.uint64)
    pad[:len(v_bits)] = np.asarray(v_bits, dtype=np.uint64)
    beats = []
    for k in range(n_words):
        beat = 0
        for q in range(nr):
            beat |= int(pad[k * nr + q]) << (q * w)
        beats.append(beat)
    return beats


def emit_unload_diag(b, cfg, reg: Region, n: int, name: str) -> int:
    """Send a diag-layout vector (``n`` local words) to the host: the diagonal PE of each
    column drives its column bus (``cdrv @diag=0``, only it reads), ``hout col``: one beat
    per local word, the last with ``tlast``. ``n`` instructions."""
    reg = reg.bind(cfg)

    def elem(i, agu, last=False):
        return [reg.rd(i, agu=agu, gate="cdrv"), cdrv(reg.src, diag=0), hout("col", last=last)]

    if n > 1:
        _elements(b, n - 1, elem, name)
    b.emit(*elem(n - 1, None, True))
    return n


def decode_diag_beats(cfg, beats, n: int) -> np.ndarray:
    """Beats of :func:`emit_unload_diag` -> the global vector (length ``n``, bit patterns)."""
    nr, w = cfg.nr, cfg.fmt.width
    m = (1 << w) - 1
    vals = [(int(bt.data) >> (q * w)) & m for bt in beats for q in range(nr)]
    return np.array(vals[:n], dtype=cfg.fmt.np_uint)


def _fused_tail(cfg, m: int, n: int) -> int:
    """Instructions :func:`sw.kernels.emit_gemv_t_rank1` issues after its last ``W``
    update (a lower bound: the last block's NOPs to ``Lc2``, its reduction steps and the
    final moves, without the gap NOPs)."""
    c = gemv_t_rank1_cost(cfg, m, n)
    lc, lc2, p = (c["rem"], c["Lc2_last"], c["P_last"]) if c["rem"] else (c["L"], c["Lc2"], c["P"])
    return (lc2 - 2 * lc) + c["S"] * p + c["L"]


def _sgd_ops(cfg, mlp: MLP, al: Allocator, wbanks: list, predict: bool = False, fused: list | None = None,
             softmax: str | None = None) -> list:
    """The ops of one SGD step (``predict``: of the forward pass only, ending with the
    unload of the output; ``fused[l]``: layer ``l``'s backward step is one
    :func:`sw.kernels.emit_gemv_t_rank1` instead of ``emit_gemv`` (trans) + ``emit_rank1``)."""
    fused = fused or [False] * mlp.n_layers
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    S, nl = mlp.sizes, mlp.n_layers
    R = {k: v.region for k, v in al.items.items()}
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    ops = []

    def load(name, key):
        n = al.items[name].words
        reg = R[name]
        lay = "cols" if key == "x" else "rows"
        ops.append(Op(f"load_{name}", "load", lambda b, reg=reg, n=n, k=len(ops), lay=lay:
                      emit_load_vector(b, cfg, reg, n, lay, f"ld{k}_"), writes=[(reg, n)], data=key, words=n))

    def unload(name, key):
        n = al.items[name].words
        reg = R[name]
        ops.append(Op(f"unload_{name}", "unload", lambda b, reg=reg, n=n, k=len(ops):
                      emit_unload_diag(b, cfg, reg, n, f"ul{k}_"), reads=[(reg, n)], data=key, words=n))

    def kern(name, kind, fn, reads, writes, fma_wb=False):
        # axpy and rank-1 (v in the cols layout) write only through the FMA write-back
        ops.append(Op(name, kind, lambda b, fn=fn: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
                      stores=not fma_wb))

    # ---- forward ------------------------------------------------------------------------
    load("x", "x")
    if (mlp.loss == "mse" or softmax == "array") and not predict:
        load("t", "t")
    for l in range(nl):
        m, n = mlp.shape(l)
        W, y = R[f"W{l}"], R[f"z{l + 1}"]
        wn = L(m) * L(n)
        if l == 0:
            x, xc, xl = R["x"], None, None
            rd = [(W, wn), (x, L(n))]
            wr = [(y, L(m))]
        else:
            x, xc, xl = R[f"z{l}"], R[f"c{l}"], "diag"
            rd = [(W, wn), (x, L(n))]
            wr = [(y, L(m)), (xc, L(n) + 1)]
        kern(f"gemv{l}", "gemv", lambda b, l=l, m=m, n=n, W=W, x=x, y=y, xc=xc, xl=xl:
             emit_gemv(b, cfg, m, n, W, x, y, x_layout=xl, x_copy=xc, name=f"fw{l}_"), rd, wr)
        if l < nl - 1:
            z = R[f"z{l + 1}"]
            kern(f"relu{l + 1}", "relu", lambda b, z=z, k=L(m), l=l:
                 emit_relu(b, cfg, k, z, z, name=f"re{l}_"), [(z, L(m))], [(z, L(m))])
    # ---- loss gradient ------------------------------------------------------------------
    zo = R[f"z{nl}"]
    no = L(S[nl])
    if predict:
        unload(f"z{nl}", "z")
        return ops
    if mlp.loss == "mse":
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, no, m1, R["t"], zo, name="lg_"),
             [(R["t"], no), (zo, no), (R["m1"], 1)], [(zo, no)], fma_wb=True)
        dout = zo
    elif softmax == "array":
        ops.append(softmax_op(cfg, R, al, S[nl], zo))
        dout = R["g"]
    else:
        unload(f"z{nl}", "logits")
        ops.append(Op("host_softmax", "host"))
        load("g", "g")
        dout = R["g"]
    # ---- backward and updates -----------------------------------------------------------
    for l in range(nl - 1, -1, -1):
        m, n = mlp.shape(l)
        W = R[f"W{l}"]
        wn = L(m) * L(n)
        if l == nl - 1:
            d, dlay, dcopy = dout, "rows", None
        else:
            d, dlay, dcopy = R[f"dm{l + 1}"], "diag", R.get(f"dc{l + 1}")
        if l >= 1 and fused[l]:
            # y = W^T d (old W) and W += d (alpha a)^T in one pass; a = the cols copy of a_l.
            # It reads up to L words past the end of c_l and one past d (values unused,
            # addresses wrap): only the used extents are hazards. W is written by FMA
            # write-backs (the last at least fpu_latency instructions before its end), e by
            # stores (its last instructions).
            e, a, dm, v = R[f"e{l}"], R[f"z{l}"], R[f"dm{l}"], R[f"c{l}"]
            ops.append(Op(f"bwup{l}", "gemv_t_rank1", lambda b, l=l, m=m, n=n, W=W, d=d, e=e, dlay=dlay, v=v:
                          emit_gemv_t_rank1(b, cfg, m, n, W, d, v, e, alpha=nlr, d_layout=dlay,
                                            name=f"bu{l}_").instructions,
                          reads=[(W, wn), (d, L(m)), (v, L(n)), (R["nlr"], 1)], writes=[(W, wn), (e, L(n))],
                          fma_wb=True, stores=True, wb=[(W, wn)], wb_tail=_fused_tail(cfg, m, n)))
            kern(f"mask{l}", "relu_mask", lambda b, l=l, n=n, e=e, a=a, dm=dm:
                 emit_relu_mask(b, cfg, L(n), e, a, dm, layout="diag", name=f"mk{l}_"),
                 [(e, L(n)), (a, L(n))], [(dm, L(n))])
            continue
        if l >= 1:
            e, a, dm = R[f"e{l}"], R[f"z{l}"], R[f"dm{l}"]
            wr = [(e, L(n))] + ([(dcopy, L(m) + 1)] if dcopy is not None else [])
            kern(f"gemv_t{l}", "gemv_t", lambda b, l=l, m=m, n=n, W=W, d=d, e=e, dlay=dlay, dcopy=dcopy:
                 emit_gemv(b, cfg, m, n, W, d, e, trans=True, x_layout=dlay if dlay == "diag" else None,
                           x_copy=dcopy, name=f"bw{l}_"), [(W, wn), (d, L(m))], wr)
            kern(f"mask{l}", "relu_mask", lambda b, l=l, n=n, e=e, a=a, dm=dm:
                 emit_relu_mask(b, cfg, L(n), e, a, dm, layout="diag", name=f"mk{l}_"),
                 [(e, L(n)), (a, L(n))], [(dm, L(n))])
        v = R["x"] if l == 0 else R[f"c{l}"]
        kern(f"rank1_{l}", "rank1", lambda b, l=l, m=m, n=n, W=W, d=d, dlay=dlay, v=v:
             emit_rank1(b, cfg, m, n, W, d, v, alpha=nlr, u_layout=dlay, v_layout="cols", name=f"up{l}_"),
             [(W, wn), (d, L(m)), (v, L(n)), (R["nlr"], 1)], [(W, wn)], fma_wb=True)
    if mlp.loss == "mse":
        unload(f"z{nl}", "d")
    elif softmax == "array":
        unload(f"z{nl}", "logits")
    return ops


# ======================================================================================
# packing ops into microprograms, microprograms into microcode images
# ======================================================================================
@dataclass
class StepProgram:
    """One microprogram (one RUN): its ops, the NOPs before each, where it lives."""

    name: str
    ops: list                 #: the Ops in order
    gaps: list                #: NOPs inserted before each op
    instructions: int         #: instructions issued per RUN (without the HALT)
    image: int = 0            #: index of the microcode image holding it
    origin: int = 0           #: its first microcode address (the RUN's start pc)
    words: list = field(default_factory=list)

    def loads(self):
        return [o for o in self.ops if o.kind == "load"]

    def unloads(self):
        return [o for o in self.ops if o.kind == "unload"]


def _build(cfg, ops, gaps, origin=0):
    """Assemble ``ops`` with ``gaps`` NOPs before each, plus the HALT, at ``origin``.
    Returns ``(Program, instructions issued)``."""
    b = Builder(cfg, origin=origin)
    ins = 0
    for op, g in zip(ops, gaps):
        for _ in range(g):
            b.nop()
        ins += g + op.emit(b)
    b.halt()
    return b.build(), ins


def _size(cfg, ops):
    """Microcode words of ``ops`` as one program (with its gaps and HALT)."""
    from dataclasses import replace

    return len(_build(replace(cfg, ucode_depth=1 << 16), ops, _gaps(cfg, ops))[0])


def _gaps(cfg, seq):
    return [0] + [kernel_gap(cfg, a, b) for a, b in zip(seq, seq[1:])]


def _split_ops(cfg, ops: list) -> list:
    """Greedy: as many consecutive ops per microprogram as fit ``ucode_depth``; a
    ``host`` op always ends a program. Returns lists of ops."""
    groups, cur = [], []
    for op in ops:
        if op.kind == "host":
            if cur:
                groups.append(cur)
            cur = []
            continue
        if _size(cfg, [op]) > cfg.ucode_depth:
            raise TrainCompileError(f"kernel {op.name} alone needs {_size(cfg, [op])} microcode words; the core "
                                    f"holds {cfg.ucode_depth} (ArchConfig.ucode_depth)")
        if cur and _size(cfg, cur + [op]) > cfg.ucode_depth:
            groups.append(cur)
            cur = []
        cur.append(op)
    if cur:
        groups.append(cur)
    return groups


def _place(cfg, named_groups: list) -> tuple:
    """Assemble the programs; all in one microcode image (at consecutive origins) when
    they fit together, else each in its own image at origin 0 (reloaded per RUN)."""
    sizes = [_size(cfg, ops) for _, ops in named_groups]
    together = sum(sizes) <= cfg.ucode_depth
    progs, images, org = [], [], 0
    for (name, ops), size in zip(named_groups, sizes):
        if not together:
            org = 0
            images.append([])
        elif not images:
            images.append([])
        g = _gaps(cfg, ops)
        p, ins = _build(cfg, ops, g, origin=org)
        words = p.words()
        images[-1].extend(words)
        progs.append(StepProgram(name, ops, g, ins, len(images) - 1, org, words))
        org += len(words)
    return progs, images


# ======================================================================================
# the compiled program and its host side
# ======================================================================================
def ops_breakdown(cfg, programs) -> list:
    """``(op name, kind, instructions)`` of every op and gap of ``programs`` (``(ops,
    gaps)`` pairs, one per RUN), each RUN ending with its HALT and drain."""
    out = []
    for ops, gaps in programs:
        b = Builder(cfg)
        for op, g in zip(ops, gaps):
            if g:
                out.append(("gap", "nop", g))
            out.append((op.name, op.kind, op.emit(b)))
        out.append(("halt+drain", "halt", cfg.run_overhead))
    return out


def vector_bits(fmt, x, n: int) -> np.ndarray:
    """A host vector of ``n`` values (floats, or bit patterns of ``fmt``) as bit patterns."""
    x = np.asarray(x)
    if x.shape != (n,):
        raise ValueError(f"expected a vector of {n} values, got shape {x.shape}")
    if x.dtype == fmt.np_uint:
        return x
    return fmt.from_float(x.astype(np.float64)).astype(fmt.np_uint)


def breakdown_lines(rows) -> list:
    """The table :meth:`TrainProgram.describe` prints under the memory map."""
    return [f"{'op':<14} {'kind':<10} {'cycles':>7}"] + [f"{n:<14} {k:<10} {i:>7}" for n, k, i in rows]


@dataclass
class StepResult:
    loss: float                   #: the sample's loss (float64, from what was unloaded)
    output: np.ndarray            #: the network output z (MSE: d + t) as floats
    counters: list                #: counters of each RUN
    cycles: int                   #: RUN cycles of the step (sum over its RUNs)
    host_cycles: int              #: assumed host turnaround cycles (softmax), 0 for MSE
    raw: dict = field(default_factory=dict)   #: unloaded bit patterns by name


@dataclass
class TrainProgram:
    """A compiled SGD step (see the module docstring)."""

    cfg: object
    mlp: MLP
    wbanks: list
    alloc: Allocator
    ops: list
    programs: list                #: StepPrograms of one training step, in order
    predict_programs: list        #: forward only: load x, forward, unload the output
    images: list                  #: microcode images (lists of words) holding the programs
    neg_lr: int                   #: bit pattern of -lr as stored
    meta: dict = field(default_factory=dict)
    fused: list = field(default_factory=list)   #: per layer: backward step fused (gemv_t_rank1)
    softmax: str | None = None    #: softmax_ce: "array" or "host" (:func:`resolve_softmax`)

    # -- figures ------------------------------------------------------------------------
    @property
    def regions(self) -> dict:
        return {k: v.region for k, v in self.alloc.items.items()}

    def predicted_cycles(self) -> list:
        """RUN cycles of each program: instructions + HALT + start latency + drain."""
        return [p.instructions + self.cfg.run_overhead for p in self.programs]

    def step_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        """Cycles of one step: its RUNs plus, for softmax, the host turnaround."""
        return sum(self.predicted_cycles()) + self.host_cycles(host_latency)

    def host_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        return host_latency * sum(1 for o in self.ops if o.kind == "host")

    def breakdown(self) -> list:
        """``(op name, kind, instructions)`` of every op and gap of the step, in order."""
        return ops_breakdown(self.cfg, [(p.ops, p.gaps) for p in self.programs])

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"SGD step of {self.mlp.describe()} on one {cfg.nr}x{cfg.nr} {cfg.fmt} core",
                 f"  weights in bank(s) {', '.join(b.upper() for b in self.wbanks)}; "
                 f"{len(self.programs)} step microprogram(s) of "
                 f"{', '.join(str(len(p.words)) for p in self.programs)} words (+ predict "
                 f"{sum(len(p.words) for p in self.predict_programs)}) in {len(self.images)} microcode image(s); "
                 f"{sum(self.predicted_cycles())} RUN cycles per step"
                 + (f" + {self.host_cycles()} host cycles" if self.host_cycles() else "")
                 + (f"; softmax gradient on the {self.softmax}" if self.softmax else ""),
                 "", self.alloc.table(), ""] + breakdown_lines(self.breakdown())
        return "\n".join(lines)

    # -- host data ----------------------------------------------------------------------
    def _vec(self, x, n):
        return vector_bits(self.cfg.fmt, x, n)

    def _beats(self, op, vecs):
        return vector_beats(self.cfg, vecs[op.data], op.words)

    def init_phases(self, weights) -> list:
        """Phases (``(words, data, name)``) loading the weights (global ``(m, n)`` bit
        patterns or floats) and the scalars: split to fit the microcode."""
        from sw.transfer import emit_load, load_beats_for

        cfg, nr, fmt = self.cfg, self.cfg.nr, self.cfg.fmt
        items = [(self.regions[f"W{l}"], pack_matrix(W, nr))
                 for l, W in enumerate(weight_bits(self.mlp, fmt, weights))]
        scal = {"nlr": self.neg_lr}
        if self.mlp.loss == "mse":
            scal["m1"] = int(fmt.from_float(np.array([-1.0]))[0])
        for k, v in scal.items():
            items.append((self.regions[k], np.full((nr, nr, 1), v, dtype=fmt.np_uint)))
        if self.softmax == "array":
            items += softmax_const_items(cfg, self.regions, self.mlp.n_out)
        phases, cur, size = [], [], 0
        per = 1 + 3 * nr
        for it in items:
            if cur and size + per > cfg.ucode_depth - 1:
                phases.append(cur)
                cur, size = [], 0
            cur.append(it)
            size += per
        phases.append(cur)
        out = []
        for i, grp in enumerate(phases):
            b = Builder(cfg)
            data = []
            for j, (reg, local) in enumerate(grp):
                emit_load(b, cfg, reg.bank, reg.base, local.shape[2], loop=f"w{j}_")
                data += load_beats_for(cfg, local)
            b.halt()
            out.append((b.build().words(), data, f"init{i}"))
        return out

    def init(self, session, weights) -> None:
        """Load the initial weights and the scalars into the PE memories."""
        for words, data, name in self.init_phases(weights):
            session.run(words, data, name)

    def run_step(self, session, x, t, *, host_latency: int = HOST_LATENCY_CYCLES,
                 check_cycles: bool = True) -> StepResult:
        """One SGD step on ``session``: ``x`` the input (floats or bit patterns), ``t``
        the target (a vector of ``n_out`` values, or for ``softmax_ce`` a class index)."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        no = mlp.n_out
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        vecs = {"x": self._vec(x, mlp.n_in)}
        tf = np.asarray(t, dtype=np.float64) if np.asarray(t).dtype != fmt.np_uint else fmt.to_float(t)
        if tf.shape != (no,):
            raise ValueError(f"target must have {no} values, got shape {tf.shape}")
        if mlp.loss == "mse" or self.softmax == "array":
            vecs["t"] = self._vec(t, no)
        raw, ctrs = {}, []
        for i, p in enumerate(self.programs):
            data = []
            for op in p.loads():
                if op.data == "g":
                    vecs["g"] = host_softmax_grad(fmt, raw["logits"], tf)
                data += self._beats(op, vecs)
            res = session.run(self.images[p.image], data, f"step-{p.name}", p.origin)
            c = res.counters
            if check_cycles and c["cycles"] != self.predicted_cycles()[i]:
                raise AssertionError(f"program {i}: {c['cycles']} cycles, predicted {self.predicted_cycles()[i]}")
            if c["mem_conflict"] or c["rf_conflict"]:
                raise AssertionError(f"program {i}: {c['mem_conflict']} SRAM and {c['rf_conflict']} register "
                                     f"write conflicts")
            ctrs.append(c)
            pos = 0
            for op in p.unloads():
                raw[op.data] = decode_diag_beats(cfg, res.data[pos:pos + op.words], no)
                pos += op.words
        if mlp.loss == "mse":
            d = fmt.to_float(raw["d"])
            loss, out = mse_loss(d), d + tf
        else:
            z = fmt.to_float(raw["logits"])
            loss, out = softmax_ce_loss(z, tf), z
        cyc = sum(c["cycles"] for c in ctrs)
        return StepResult(loss, out, ctrs, cyc, self.host_cycles(host_latency), raw)

    def predict(self, session, x) -> np.ndarray:
        """The network output for input ``x`` computed on the array (forward pass only;
        the weights are not changed). Returns floats."""
        res = None
        for i, p in enumerate(self.predict_programs):
            data = vector_beats(self.cfg, self._vec(x, self.mlp.n_in), p.ops[0].words) if i == 0 else []
            res = session.run(self.images[p.image], data, p.name, p.origin)
        return self.cfg.fmt.to_float(decode_diag_beats(self.cfg, res.data, self.mlp.n_out))

    # -- weights back -------------------------------------------------------------------
    def weights_from_session(self, session, padded: bool = False) -> list:
        """The weights as they are in the PE memories (global bit patterns; ``padded``:
        the ``(mp * nr, np * nr)`` arrays including the padding)."""
        out = []
        mem = {b: session.memory(b) for b in ("a", "b")}
        for l in range(self.mlp.n_layers):
            out.append(self._weights_from_local(l, mem[self.wbanks[l]][:, :, self._wslice(l)], padded))
        return out

    def _wslice(self, l):
        r = self.regions[f"W{l}"]
        return slice(r.base, r.base + self.alloc.items[f"W{l}"].words)

    def _weights_from_local(self, l, local, padded):
        nr = self.cfg.nr
        m, n = self.mlp.shape(l)
        if padded:
            return unpack_matrix(local, local_len(m, nr) * nr, local_len(n, nr) * nr)
        return unpack_matrix(local, m, n)

    def unload_weights_phases(self) -> list:
        """Phases unloading every weight matrix (``(words, data, name)``); decode the
        phases' output beats with :meth:`decode_weights`."""
        from sw.transfer import emit_unload

        cfg = self.cfg
        out = []
        for l in range(self.mlp.n_layers):
            reg, n = self.regions[f"W{l}"], self.alloc.items[f"W{l}"].words
            b = Builder(cfg)
            emit_unload(b, cfg, reg.bank, reg.base, n, loop="uw")
            b.halt()
            out.append((b.build().words(), [], f"unload-W{l}"))
        return out

    def decode_weights(self, results, padded: bool = False) -> list:
        """Weights from the :class:`sim.core_run.JobResult` of each
        :meth:`unload_weights_phases` phase."""
        from sw.transfer import decode_unload

        out = []
        for l, r in enumerate(results):
            n = self.alloc.items[f"W{l}"].words
            out.append(self._weights_from_local(l, decode_unload(self.cfg, r.data, n), padded))
        return out


def compile_sgd(cfg, mlp: MLP, *, policy: str = "auto", backward: str = "auto",
                tolerance: float = FUSED_TOLERANCE, softmax: str = "auto") -> TrainProgram:
    """Compile batch-1 SGD of ``mlp`` for one core of ``cfg`` (see the module docstring).

    ``backward``: how each layer ``l >= 1`` computes ``W_l^T d`` and its update:
    ``"fused"`` (one :func:`sw.kernels.emit_gemv_t_rank1`), ``"separate"`` (transposed
    GEMV, then rank-1 after the mask) or ``"auto"`` (:func:`backward_plan`); the choice is
    :attr:`TrainProgram.fused`, which :class:`sw.golden_train.GoldenSGD` follows.
    ``softmax`` (``softmax_ce`` only): :func:`resolve_softmax`; the choice is
    :attr:`TrainProgram.softmax`.

    Raises :class:`TrainCompileError` when the network does not fit the PE memories
    (with the sizes), a kernel does not fit the microcode, ``-lr`` is not representable,
    or ``mlp.batch != 1``."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be an sw.mlp.MLP, got {type(mlp).__name__}")
    if mlp.batch != 1:
        raise TrainCompileError(f"only batch 1 (SGD) is compiled so far, got MLP.batch = {mlp.batch}")
    if cfg.nr < 2:
        raise TrainCompileError(f"the kernels need nr >= 2, got nr = {cfg.nr}")
    fmt = cfg.fmt
    nlr = fmt.from_float(np.array([-mlp.lr]))[0]
    v = float(fmt.to_float(np.array([nlr]))[0])
    if v == 0.0 or not np.isfinite(v):
        raise TrainCompileError(f"learning rate {mlp.lr:g} is {'zero' if v == 0 else 'not finite'} in {fmt}")
    for n in mlp.sizes:
        if local_len(n, cfg.nr) + 1 >= (1 << cfg.loop_bits):
            raise TrainCompileError(f"layer size {n} exceeds the loop trip-count range of the configuration")
    fused = backward_plan(cfg, mlp, backward, tolerance)
    smx = resolve_softmax(cfg, mlp, softmax)
    cands = [(p, map_layers(cfg, mlp, p)) for p in (["a", "balanced"] if policy == "auto" else [policy])]
    if policy == "auto" and mlp.n_layers <= 10:
        import itertools

        cands += [("search", list(c)) for c in itertools.product("ab", repeat=mlp.n_layers)]
    al = None
    for pol, wbanks in cands:
        al = _allocate(cfg, mlp, wbanks, fused, smx)
        if al.fits():
            break
    if not al.fits():
        nr = cfg.nr
        wsz = ", ".join(f"W{l} {mlp.shape(l)[0]}x{mlp.shape(l)[1]}: "
                        f"{local_len(mlp.shape(l)[0], nr) * local_len(mlp.shape(l)[1], nr)}"
                        for l in range(mlp.n_layers))
        pol, wbanks = cands[1] if len(cands) > 1 else cands[0]      # report the balanced attempt
        al = _allocate(cfg, mlp, wbanks, fused, smx)
        need = al.used("a") + al.used("b")
        raise TrainCompileError(
            f"MLP {'-'.join(map(str, mlp.sizes))} does not fit one {nr}x{nr} core: it needs "
            f"{need} words per PE (MEM A {al.used('a')}, MEM B {al.used('b')} with weights in "
            f"{'/'.join(b.upper() for b in wbanks)}; weights per PE: {wsz}), the configuration has "
            f"MEM A {cfg.mem_a_words} + MEM B {cfg.mem_b_words} words of {fmt} per PE "
            f"({cfg.pe_sram_bytes} bytes); no assignment of the weight matrices to the banks fits")
    ops = _sgd_ops(cfg, mlp, al, wbanks, fused=fused, softmax=smx)
    groups = [(f"step{i}", g) for i, g in enumerate(_split_ops(cfg, ops))]
    pgroups = [(f"predict{i}", g) for i, g in enumerate(_split_ops(cfg, _sgd_ops(cfg, mlp, al, wbanks, predict=True)))]
    progs, images = _place(cfg, groups + pgroups)
    return TrainProgram(cfg, mlp, wbanks, al, ops, progs[:len(groups)], progs[len(groups):], images, int(nlr),
                        {"lr_stored": -v, "policy": pol, "backward": backward}, fused, smx)
