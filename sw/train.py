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

from sw.asm import Builder
from sw.host_protocol import steady_reload
from sw.collectives import Region  # noqa: F401  (re-exported)
from sw.kernels import (Scalar, elementwise_cost, emit_axpy, emit_gemv, emit_gemv_t_rank1, emit_rank1, emit_relu,
                        emit_relu_mask, gemv_cost, gemv_t_rank1_cost, rank1_cost)
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
# the pieces every trainer shares, importable from here as well
from sw.train_alloc import Allocator, _other  # noqa: F401
from sw.train_host import (HOST_LATENCY_CYCLES, SOFTMAX_MODES, StepResult, TrainCompileError,  # noqa: F401
                           host_softmax_grad, init_weights, mse_loss, one_hot, resolve_softmax, softmax_ce_loss,
                           weight_bits)
from sw.train_ops import Op, _fused_tail, breakdown_lines, kernel_gap, ops_breakdown  # noqa: F401
from sw.train_softmax import alloc_softmax, softmax_const_items, softmax_op  # noqa: F401
from sw.train_vectors import (decode_diag_beats, emit_load_vector, emit_unload_diag, vector_beats,  # noqa: F401
                              vector_bits)

__all__ = ["TrainCompileError", "TrainProgram", "compile_sgd", "map_layers", "Allocator",
           "StepResult", "kernel_gap", "HOST_LATENCY_CYCLES", "host_softmax_grad", "init_weights",
           "softmax_ce_loss", "mse_loss", "backward_plan", "backward_costs", "FUSED_TOLERANCE",
           "resolve_softmax", "SOFTMAX_MODES"]


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


# ======================================================================================
# 3. the per-method emitter: the ops of one step
# ======================================================================================
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
        """Cycles of one step: its RUNs, the microcode LOADs between them
        (:meth:`reload_cycles`) and, for softmax, the host turnaround."""
        return sum(self.predicted_cycles()) + self.reload_cycles() + self.host_cycles(host_latency)

    def step_runs(self) -> list:
        """Per RUN of a step, in order, the microcode image it runs from (as a list of
        one core's images, :func:`sw.host_protocol.steady_reload`)."""
        return [[self.images[p.image]] for p in self.programs]

    def reload_cycles(self) -> int:
        """Host stream cycles of a step's microcode LOADs in steady state (the step
        after another; the LOADs write only the words that differ); 0 when the step's
        programs share one image."""
        if "_reload_cache" not in self.__dict__:
            self.__dict__["_reload_cache"] = steady_reload(self.cfg, self.step_runs())[0]
        return self.__dict__["_reload_cache"]

    def _resume(self, session) -> None:
        """Leave the core holding the image a step ends with (after the weights'
        loading or a prediction), so every step LOADs the same words."""
        if hasattr(session, "load"):
            session.load(self.step_runs()[-1][0])

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
        from sw.transfer import load_programs

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
        return [(words, data, f"init{i}") for i, (words, data) in enumerate(load_programs(cfg, items))]

    def init(self, session, weights) -> None:
        """Load the initial weights and the scalars into the PE memories."""
        for words, data, name in self.init_phases(weights):
            session.run(words, data, name)
        self._resume(session)

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
        raw, ctrs, lc = {}, [], 0
        for i, p in enumerate(self.programs):
            data = []
            for op in p.loads():
                if op.data == "g":
                    vecs["g"] = host_softmax_grad(fmt, raw["logits"], tf)
                data += self._beats(op, vecs)
            res = session.run(self.images[p.image], data, f"step-{p.name}", p.origin)
            lc += getattr(session, "last_load_cycles", 0)
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
        cyc = sum(c["cycles"] for c in ctrs) + lc
        return StepResult(loss, out, ctrs, cyc, self.host_cycles(host_latency), raw, lc)

    def predict(self, session, x) -> np.ndarray:
        """The network output for input ``x`` computed on the array (forward pass only;
        the weights are not changed). Returns floats."""
        res = None
        for i, p in enumerate(self.predict_programs):
            data = vector_beats(self.cfg, self._vec(x, self.mlp.n_in), p.ops[0].words) if i == 0 else []
            res = session.run(self.images[p.image], data, p.name, p.origin)
        self._resume(session)
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
