"""Batch-1 SGD on a heterogeneous chip, each layer's phases on the core group a
:class:`sw.train_hetero_place.Placement` names (``docs/hybrid.md``).

Layer ``l`` lives on one core ``c_l`` of its group (its padded weights in that core's PE
memories; several layers may share a core). A step is a sequence of RUNs, one core at a
time, the vectors between layers passing through the host (the cores' host streams):

```text
F_l  (l < L-1, core c_l):   load a_l (cols); z = W a_l; z = relu(z); unload z -> a_{l+1}
F_{L-1} (output core):      load a_{L-1}; z = W a; load t; d = z - t; unload d (the loss);
                            e = W^T d; e = mask(e, a); unload e -> g_{L-2}; W += -lr d a^T
B_l  (l = L-2 .. 0, c_l):   load g_l (rows); l >= 1: e = W^T g_l; e = mask(e, a_l);
                            unload e -> g_{l-1};  W += -lr g_l a_l^T
```

The kernels are those of the single-core compiler (:mod:`sw.train`; ``emit_gemv``,
``emit_relu``, ``emit_axpy``, ``emit_relu_mask``, ``emit_rank1``; the separate
backward step) at the core kind's ``nr``: a vector leaves a core with its real length
and enters the next one zero-padded to that core's ``nr``. :class:`GoldenHetero`
(:mod:`sw.golden_train_hetero`) does the same operations in numpy. Loss: MSE.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sw.kernels import Scalar, emit_axpy, emit_gemv, emit_rank1, emit_relu, emit_relu_mask
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.train import _place, _split_ops
from sw.train_alloc import Allocator
from sw.train_hetero_place import Placement, check_placement, layer_words
from sw.train_host import TrainCompileError, mse_loss, weight_bits
from sw.train_ops import Op
from sw.train_vectors import decode_diag_beats, emit_load_vector, emit_unload_diag, vector_beats, vector_bits

__all__ = ["compile_hetero", "HeteroTrainProgram", "HeteroStep", "assign_cores", "check_fit"]


def assign_cores(hcfg, mlp: MLP, placement: Placement) -> list:
    """Chip core of every layer: the placement's core, else the core of its group with
    the fewest weight words so far that still has room for this layer's (first fit)."""
    check_placement(hcfg, mlp, placement)
    starts = [sum(g.count for g in hcfg.groups[:i]) for i in range(len(hcfg.groups))]
    used: dict = {}
    out = []
    for l, p in enumerate(placement.layers):
        g, cfg = p.forward, hcfg.group_cfgs[p.forward]
        m, n = mlp.shape(l)
        w = layer_words(cfg, m, n) // (cfg.nr * cfg.nr)
        cap = cfg.mem_a_words + cfg.mem_b_words
        if p.core is not None:
            k = starts[g] + p.core
        else:
            cands = [starts[g] + i for i in range(hcfg.groups[g].count)]
            fit = [k for k in cands if used.get(k, 0) + w <= cap * 0.9]
            k = min(fit or cands, key=lambda k: (used.get(k, 0), k))
        used[k] = used.get(k, 0) + w
        out.append(k)
    return out


@dataclass
class HeteroStep:
    loss: float
    output: np.ndarray
    cycles: int                  #: the step's RUN cycles (one core at a time)
    runs: list                   #: per RUN: (phase, core, cycles)
    counters: list               #: per core, the step's counters


@dataclass
class HeteroTrainProgram:
    hcfg: object
    mlp: MLP
    placement: Placement
    cores: list                   #: per layer, its chip core
    allocs: dict                  #: core -> Allocator
    programs: dict                #: phase name -> [StepProgram] (on the phase's core)
    images: dict                  #: core -> microcode images
    phase_core: dict              #: phase name -> core
    order: list                   #: phase names of a step, in order
    neg_lr: int
    meta: dict = field(default_factory=dict)

    # -- figures --------------------------------------------------------------------
    def cfg(self, k: int):
        return self.hcfg.core_cfg(k)

    def phase_cycles(self) -> dict:
        """Predicted cycles of each phase: its RUNs' instructions plus each RUN's overhead."""
        return {ph: sum(p.instructions + self.cfg(self.phase_core[ph]).run_overhead for p in self.programs[ph])
                for ph in self.order}

    def step_cycles(self) -> int:
        return sum(self.phase_cycles().values())

    def reloads(self) -> int:
        """Microcode reloads per step (cores whose programs need more than one image)."""
        return sum(len(self.programs[ph]) for ph in self.order if len(self.images[self.phase_core[ph]]) > 1)

    def describe(self) -> str:
        h = self.hcfg
        lines = [f"SGD step of {self.mlp.describe()} on a heterogeneous chip of {h.cores} cores "
                 f"({', '.join(f'group {i}: {g.count} x {c.nr}x{c.nr} {c.fmt}' for i, (g, c) in enumerate(zip(h.groups, h.group_cfgs)))})",
                 f"  placement {self.placement.short()}: " + ", ".join(
                     f"layer {l} on core {k} (group {h.group_of(k)})" for l, k in enumerate(self.cores))]
        pc = self.phase_cycles()
        for ph in self.order:
            lines.append(f"  {ph:<6} core {self.phase_core[ph]:>2}: {pc[ph]} cycles")
        lines.append(f"  {self.step_cycles()} cycles per step (RUNs one after another; host transfers inside them)")
        return "\n".join(lines)

    # -- host side ------------------------------------------------------------------
    def init(self, model, weights) -> None:
        """Load every core's microcode (its first image), weights and scalars."""
        from sw.asm import Builder
        from sw.transfer import emit_load, load_beats_for

        wb = None
        for k, al in self.allocs.items():
            cfg = self.cfg(k)
            wb = weight_bits(self.mlp, cfg.fmt, weights)
            items = []
            for l in [l for l, c in enumerate(self.cores) if c == k]:
                items.append((al.items[f"W{l}"].region, pack_matrix(wb[l], cfg.nr)))
            for name, v in (("nlr", self.neg_lr), ("m1", int(cfg.fmt.from_float(np.array([-1.0]))[0]))):
                if name in al.items:
                    items.append((al.items[name].region, np.full((cfg.nr, cfg.nr, 1), v, dtype=cfg.fmt.np_uint)))
            per = 1 + 3 * cfg.nr
            groups, cur = [], []
            for it in items:
                if cur and (len(cur) + 1) * per > cfg.ucode_depth - 1:
                    groups.append(cur)
                    cur = []
                cur.append(it)
            groups.append(cur)
            for grp in groups:
                b = Builder(cfg)
                data = []
                for j, (reg, local) in enumerate(grp):
                    emit_load(b, cfg, reg.bank, reg.base, local.shape[2], loop=f"w{j}_")
                    data += load_beats_for(cfg, local)
                b.halt()
                model.load(b.build().words(), 0, core=k)
                model.cores[k].run(0, data, ring_in=())
            model.load(self.images[k][0], 0, core=k)
        self._loaded = {k: 0 for k in self.allocs}

    def run_step(self, model, x, t, check_cycles: bool = True) -> HeteroStep:
        """One SGD step on ``model`` (a :class:`sim.chip_model.ChipModel` of ``hcfg``)."""
        mlp = self.mlp
        fmt = self.cfg(self.cores[0]).fmt
        vec = {"a0": vector_bits(fmt, x, mlp.n_in), "t": vector_bits(fmt, t, mlp.n_out)}
        model.clear_counters()
        runs, pred, total = [], self.phase_cycles(), 0
        for ph in self.order:
            k = self.phase_core[ph]
            cfg = self.cfg(k)
            cyc = 0
            for p in self.programs[ph]:
                if self._loaded[k] != p.image:
                    model.load(self.images[k][p.image], 0, core=k)
                    self._loaded[k] = p.image
                data = []
                for op in p.loads():
                    data += vector_beats(cfg, vec[op.data], op.words)
                res = model.cores[k].run(p.origin, data, ring_in=())
                cyc += res.cycles
                pos = 0
                for op in p.unloads():
                    v = decode_diag_beats(cfg, res.out[pos:pos + op.words], op.words * cfg.nr)
                    vec[op.data] = v[:op.info["n"]].copy()
                    pos += op.words
            if check_cycles and cyc != pred[ph]:
                raise AssertionError(f"phase {ph} on core {k}: {cyc} cycles, predicted {pred[ph]}")
            runs.append((ph, k, cyc))
            total += cyc
        ctrs = model.counters
        for c in ctrs:
            if c.get("mem_conflict") or c.get("rf_conflict"):
                raise AssertionError(f"SRAM / register write conflicts: {c['mem_conflict']}, {c['rf_conflict']}")
        d = fmt.to_float(vec["d"])
        tf = fmt.to_float(vec["t"])
        return HeteroStep(mse_loss(d), d + tf, total, runs, ctrs)

    def weights(self, model, padded: bool = False, memory=None) -> list:
        """Every layer's weights read from its core's PE memories (global bit patterns).
        ``memory(k, bank)``: core ``k``'s bank as ``[nr, nr, words]`` (default: the fast
        engine's ``model.cores[k].memory(bank)``)."""
        memory = memory or (lambda k, b: model.cores[k].memory(b))
        out = []
        for l, k in enumerate(self.cores):
            cfg, it = self.cfg(k), self.allocs[k].items[f"W{l}"]
            local = memory(k, it.region.bank)[:, :, it.region.base:it.region.base + it.words]
            m, n = self.mlp.shape(l)
            if padded:
                m, n = local_len(m, cfg.nr) * cfg.nr, local_len(n, cfg.nr) * cfg.nr
            out.append(unpack_matrix(local, m, n))
        return out


def check_fit(hcfg, mlp: MLP, placement: Placement) -> list:
    """The cores :func:`compile_hetero` would use (memory checked, nothing assembled);
    raises :class:`PlacementError` or :class:`TrainCompileError` (one line)."""
    cores = assign_cores(hcfg, mlp, placement)
    _allocate(hcfg, mlp, cores)
    return cores


def _allocate(hcfg, mlp: MLP, cores: list) -> dict:
    nl = mlp.n_layers
    allocs = {}
    for k in sorted(set(cores)):
        cfg = hcfg.core_cfg(k)
        L = lambda n, cfg=cfg: local_len(n, cfg.nr)            # noqa: E731
        al = Allocator(cfg)
        mine = [l for l in range(nl) if cores[l] == k]
        for l in mine:        # the weights first, the larger bank first
            m, n = mlp.shape(l)
            wb = "a" if al.next["a"] + L(m) * L(n) <= al.depth("a") else "b"
            al.alloc(f"W{l}", L(m) * L(n), f"weights of layer {l} ({m} x {n})", bank=wb)
        for l in mine:
            m, n = mlp.shape(l)
            f = {al.items[f"W{l}"].region.bank}
            al.alloc(f"a{l}", L(n), f"input a{l} of layer {l} (cols, loaded)", forbid=f)
            al.alloc(f"z{l}", L(m), f"output of layer {l} (rows)", forbid=f)
            if l < nl - 1:
                al.alloc(f"g{l}", L(m), f"delta at layer {l}'s output (rows, loaded)", forbid=f)
            else:
                zb = al.items[f"z{l}"].region.bank
                al.alloc("t", L(m), "target (rows, loaded)", bank="b" if zb == "a" else "a")
                al.alloc("m1", 1, "scalar -1")
            if l >= 1:
                al.alloc(f"e{l}", L(n), f"W{l}^T d (cols)", forbid=f)
                al.alloc(f"dm{l}", L(n), f"e{l} * relu'(a{l}) (diag, unloaded)", forbid=f)
        al.alloc("nlr", 1, "scalar -lr")
        if not al.fits():
            raise TrainCompileError(f"core {k} ({cfg.nr}x{cfg.nr}): layers {mine} need {al.next['a']} + "
                                    f"{al.next['b']} words per PE, it has {cfg.mem_a_words} + {cfg.mem_b_words}")
        allocs[k] = al
    return allocs


def _phase_ops(cfg, mlp: MLP, al: Allocator, l: int, phase: str) -> list:
    """The ops of phase ``F`` (forward; on the output layer with its loss and backward)
    or ``B`` (backward and update) of layer ``l`` on a core of ``cfg``."""
    nl = mlp.n_layers
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    R = {k: v.region for k, v in al.items.items()}
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    m, n = mlp.shape(l)
    W, a, z = R[f"W{l}"], R[f"a{l}"], R[f"z{l}"]
    wn = L(m) * L(n)
    ops = []

    def load(reg, key, words, lay):
        ops.append(Op(f"load_{key}", "load", lambda b, k=len(ops): emit_load_vector(b, cfg, reg, words, lay, f"ld{l}_{k}_"),
                      writes=[(reg, words)], data=key, words=words))

    def unload(reg, key, words, nreal):
        ops.append(Op(f"unload_{key}", "unload", lambda b, k=len(ops): emit_unload_diag(b, cfg, reg, words, f"ul{l}_{k}_"),
                      reads=[(reg, words)], data=key, words=words, info={"n": nreal}))

    def kern(name, kind, fn, reads, writes, fma_wb=False):
        ops.append(Op(name, kind, lambda b: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
                      stores=not fma_wb))

    def backward(d):
        if l >= 1:
            e, dm = R[f"e{l}"], R[f"dm{l}"]
            kern(f"gemv_t{l}", "gemv_t", lambda b: emit_gemv(b, cfg, m, n, W, d, e, trans=True, name=f"bw{l}_"),
                 [(W, wn), (d, L(m))], [(e, L(n))])
            kern(f"mask{l}", "relu_mask", lambda b: emit_relu_mask(b, cfg, L(n), e, a, dm, layout="diag",
                                                                   name=f"mk{l}_"),
                 [(e, L(n)), (a, L(n))], [(dm, L(n))])
            unload(dm, f"g{l - 1}", L(n), n)
        kern(f"rank1_{l}", "rank1", lambda b: emit_rank1(b, cfg, m, n, W, d, a, alpha=nlr, u_layout="rows",
                                                         v_layout="cols", name=f"up{l}_"),
             [(W, wn), (d, L(m)), (a, L(n)), (R["nlr"], 1)], [(W, wn)], fma_wb=True)

    if phase == "F":
        load(a, f"a{l}", L(n), "cols")
        kern(f"gemv{l}", "gemv", lambda b: emit_gemv(b, cfg, m, n, W, a, z, name=f"fw{l}_"),
             [(W, wn), (a, L(n))], [(z, L(m))])
        if l < nl - 1:
            kern(f"relu{l}", "relu", lambda b: emit_relu(b, cfg, L(m), z, z, name=f"re{l}_"), [(z, L(m))], [(z, L(m))])
            unload(z, f"a{l + 1}", L(m), m)
            return ops
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        load(R["t"], "t", L(m), "rows")
        kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, L(m), m1, R["t"], z, name="lg_"),
             [(R["t"], L(m)), (z, L(m)), (R["m1"], 1)], [(z, L(m))], fma_wb=True)
        unload(z, "d", L(m), m)
        backward(z)
        return ops
    g = R[f"g{l}"]
    load(g, f"g{l}", L(m), "rows")
    backward(g)
    return ops


def compile_hetero(hcfg, mlp: MLP, placement: Placement) -> HeteroTrainProgram:
    """Compile batch-1 SGD of ``mlp`` on ``hcfg`` with ``placement`` (see the module
    docstring). Raises :class:`PlacementError` or :class:`TrainCompileError` (one line)."""
    nl = mlp.n_layers
    if nl < 2:
        raise TrainCompileError("a heterogeneous step needs at least one hidden layer")
    if mlp.loss != "mse":
        raise TrainCompileError(f"loss {mlp.loss!r}: the heterogeneous compiler trains with MSE only")
    cores = assign_cores(hcfg, mlp, placement)
    allocs = _allocate(hcfg, mlp, cores)
    order = [f"F{l}" for l in range(nl)] + [f"B{l}" for l in range(nl - 2, -1, -1)]
    phase_core = {ph: cores[int(ph[1:])] for ph in order}
    programs, images = {}, {}
    for k, al in allocs.items():
        cfg = hcfg.core_cfg(k)
        named = []
        for ph in order:
            if phase_core[ph] != k:
                continue
            groups = _split_ops(cfg, _phase_ops(cfg, mlp, al, int(ph[1:]), ph[0]))
            named += [(f"{ph}.{i}", ops) for i, ops in enumerate(groups)]
        progs, imgs = _place(cfg, named)
        images[k] = imgs
        for (name, _), p in zip(named, progs):
            programs.setdefault(name.split(".")[0], []).append(p)
    fmt = hcfg.core_cfg(cores[0]).fmt
    neg_lr = int(fmt.from_float(np.array([-mlp.lr]))[0])
    if fmt.to_float(np.array([neg_lr], dtype=fmt.np_uint))[0] == 0:
        raise TrainCompileError(f"learning rate {mlp.lr} rounds to zero in {fmt}")
    return HeteroTrainProgram(hcfg, mlp, placement, cores, allocs, programs, images, phase_core, order, neg_lr)

