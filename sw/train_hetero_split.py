"""Batch-1 SGD on a heterogeneous chip with layers split across the cores of their
group (``docs/hybrid.md``, "Layers split across a group's cores").

A layer placed on ``k`` cores of its group (``LayerPlace.cores``) keeps a row panel of
its weights on each: panel ``j`` holds rows ``j P .. j P + P - 1`` (``P``: the rows
divided by ``k``, rounded up to a multiple of the widest kind's ``nr``, so every panel
boundary is a whole beat on every link of the ring). Every core of the layer holds the
whole input vector. A step is a sequence of chip RUNs (*sections*), each core at its own
start address (a core with nothing to do runs a HALT):

```text
Ta_l  (l >= 1)   every panel of layer l-1's output to every core of layer l (one ring
                 broadcast per panel, sw.train_hetero_ring, and a copy on a core in both)
F_l              on every core of layer l: [l = 0: load x]; z_j = W_j a; relu(z_j)
                 (the output layer, on one core: its loss, W^T d, the mask and update)
B_l              on every core j of layer l: e_j = W_j^T g_j; W_j += -lr g_j a^T
R_l.j, A_l.j     e_{j-1} to core j over the ring, e_j = 1 * e_{j-1} + e_j (axpy, one
                 rounding); on the last core the mask: dm_l = e * relu'(a_l)
Tg_{l-1}         every panel of dm_l from layer l's last core to layer l-1's cores
```

The reduction's order is the one of :func:`sw.golden.gemv_t_paged` (the partials added
in panel order), and :class:`sw.golden_train_hetero.GoldenHeteroSplit` does the same
operations in numpy. The output layer is on one core. Transfers go over the ring only.
A core's panels that do not fit its PE memories are paged from its scratchpad
(:mod:`sw.train_hetero_paging`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from sw.asm import Builder, assemble
from sw.kernels import Scalar, emit_axpy, emit_copy, emit_gemv, emit_relu, emit_relu_mask, emit_rank1
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.ring import _fold
from sw.train import _build, _gaps, _split_ops
from sw.train_chip_ops import _paged_backward
from sw.train_hetero_ops import load_regions
from sw.train_hetero_paging import allocate, fill_spad, paged_forward_ops
from sw.train_hetero_place import Placement, PlacementError, check_placement
from sw.train_hetero_ring import padded_len, transfer_lines
from sw.train_host import TrainCompileError, mse_loss, weight_bits
from sw.train_ops import Op
from sw.train_paging import spad_local
from sw.train_vectors import decode_diag_beats, emit_load_vector, emit_unload_diag, vector_beats, vector_bits

__all__ = ["layer_parts", "compile_split", "SplitTrainProgram"]


def layer_parts(hcfg, mlp: MLP, placement: Placement, transfers: str = "ring") -> list:
    """Per layer, its panels ``[(core, first row, rows)]`` in ring order. Raises
    :class:`PlacementError` (one line)."""
    from sw.train_hetero import assign_cores

    check_placement(hcfg, mlp, placement, transfers)
    if transfers != "ring":
        raise PlacementError("a layer split across cores needs ring transfers")
    first = assign_cores(hcfg, mlp, placement, transfers)
    starts = [sum(g.count for g in hcfg.groups[:i]) for i in range(len(hcfg.groups))]
    wide = max(c.nr for c in hcfg.group_cfgs)
    out = []
    for l, p in enumerate(placement.layers):
        k = p.cores
        m = mlp.shape(l)[0]
        if k == 1:
            out.append([(first[l], 0, m)])
            continue
        if l == mlp.n_layers - 1:
            raise PlacementError(f"layer {l}: the output layer runs on one core (cores={k})")
        c0 = p.core or 0
        if c0 + k > hcfg.groups[p.forward].count:
            raise PlacementError(f"layer {l}: cores {c0} .. {c0 + k - 1} of group {p.forward}, which has "
                                 f"{hcfg.groups[p.forward].count} cores")
        P = -(-m // (k * wide)) * wide
        if (k - 1) * P >= m:
            raise PlacementError(f"layer {l}: {m} rows in panels of {P} (multiples of {wide}) do not fill {k} cores")
        out.append([(starts[p.forward] + c0 + j, j * P, min(P, m - j * P)) for j in range(k)])
    return out


def _allocate(hcfg, mlp, parts) -> tuple:
    """``(allocs, spad)``: :func:`sw.train_hetero_paging.allocate`."""
    return allocate(hcfg, mlp, parts)


def _at(reg, words):
    return replace(reg, base=reg.base + words)


class _Ops:
    """The ops of one core's part of a compute section."""

    def __init__(self, cfg, al, l):
        self.cfg, self.l, self.ops = cfg, l, []
        self.R = {k: v.region for k, v in al.items.items()}

    def kern(self, name, kind, fn, reads, writes, fma_wb=False):
        self.ops.append(Op(name, kind, lambda b: fn(b).instructions, reads=reads, writes=writes, fma_wb=fma_wb,
                           stores=not fma_wb))

    def load(self, reg, key, words, lay):
        cfg, l, k = self.cfg, self.l, len(self.ops)
        self.ops.append(Op(f"load_{key}", "load", lambda b: emit_load_vector(b, cfg, reg, words, lay, f"ld{l}_{k}_"),
                           writes=[(reg, words)], data=key, words=words))

    def unload(self, reg, key, words, nreal):
        cfg, l, k = self.cfg, self.l, len(self.ops)
        self.ops.append(Op(f"unload_{key}", "unload", lambda b: emit_unload_diag(b, cfg, reg, words, f"ul{l}_{k}_"),
                           reads=[(reg, words)], data=key, words=words, info={"n": nreal}))

    def copy(self, src, dst, words, tag):
        cfg = self.cfg
        self.kern(f"copy_{tag}", "relu", lambda b: emit_copy(b, cfg, words, src, dst, layout="diag",
                                                             name=f"cp{tag}_"), [(src, words)], [(dst, words)])


def _forward_ops(cfg, mlp, al, l, P, copies, sp=None) -> list:
    """``sp``: the panel's :class:`sw.train_paging.SpadPanel` when it is paged."""
    nl, L = mlp.n_layers, (lambda n: local_len(n, cfg.nr))
    o = _Ops(cfg, al, l)
    R = o.R
    n = mlp.shape(l)[1]
    W, a, z = R.get(f"W{l}"), R[f"a{l}"], R[f"z{l}"]
    wn = L(P) * L(n)
    for src, dst, words in copies:
        o.copy(src, dst, words, f"a{l}_{len(o.ops)}")
    if l == 0 and sp is not None:
        o.load(a, "a0", L(n), "cols")
    if sp is not None:
        o.ops += paged_forward_ops(cfg, al, l, n, sp)
    elif l == 0:
        o.load(a, "a0", L(n), "cols")
        o.kern(f"gemv{l}", "gemv", lambda b: emit_gemv(b, cfg, P, n, W, a, z, name=f"fw{l}_"),
               [(W, wn), (a, L(n))], [(z, L(P))])
    else:
        c = R[f"c{l}"]
        o.kern(f"gemv{l}", "gemv", lambda b: emit_gemv(b, cfg, P, n, W, a, z, x_layout="diag", x_copy=c,
                                                       name=f"fw{l}_"), [(W, wn), (a, L(n))], [(z, L(P)), (c, L(n) + 1)])
    if l < nl - 1:
        o.kern(f"relu{l}", "relu", lambda b: emit_relu(b, cfg, L(P), z, z, name=f"re{l}_"), [(z, L(P))], [(z, L(P))])
        return o.ops
    m1 = Scalar(R["m1"].bank, R["m1"].base)
    o.load(R["t"], "t", L(P), "rows")
    o.kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, L(P), m1, R["t"], z, name="lg_"),
           [(R["t"], L(P)), (z, L(P)), (R["m1"], 1)], [(z, L(P))], fma_wb=True)
    o.unload(z, "d", L(P), P)
    return o.ops + _backward_ops(cfg, mlp, al, l, P, z, "rows", True, [], sp)


def _backward_ops(cfg, mlp, al, l, P, d, dlay, last, copies, sp=None) -> list:
    """``e = W^T d`` (and the mask when the layer is on one core) and the update; a
    paged panel (``sp``) page by page (:func:`sw.train_chip_ops._paged_backward`)."""
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    o = _Ops(cfg, al, l)
    R = o.R
    n = mlp.shape(l)[1]
    W, a = R.get(f"W{l}"), R[f"a{l}"]
    v = R[f"c{l}"] if l >= 1 else a
    wn = L(P) * L(n)
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    for src, dst, words in copies:
        o.copy(src, dst, words, f"g{l}_{len(o.ops)}")
    if sp is not None:
        # the output layer's last page is still in WP from its forward GEMV (same section)
        o.ops += _paged_backward(cfg, l, sp, R, None, {l: n}, d, dlay, R.get(f"dc{l}") if dlay == "diag" else None,
                                 v, False, resident=l == mlp.n_layers - 1)
        return o.ops + (_mask_ops(cfg, mlp, al, l) if last and l >= 1 else [])
    if l >= 1:
        e = R[f"e{l}"]
        dcopy = R.get(f"dc{l}") if dlay == "diag" else None
        wr = [(e, L(n))] + ([(dcopy, L(P) + 1)] if dcopy is not None else [])
        o.kern(f"gemv_t{l}", "gemv_t", lambda b: emit_gemv(b, cfg, P, n, W, d, e, trans=True, x_layout=(
            "diag" if dlay == "diag" else None), x_copy=dcopy, name=f"bw{l}_"), [(W, wn), (d, L(P))], wr)
        if last:
            o.ops += _mask_ops(cfg, mlp, al, l)
    o.kern(f"rank1_{l}", "rank1", lambda b: emit_rank1(b, cfg, P, n, W, d, v, alpha=nlr, u_layout=dlay,
                                                       v_layout="cols", name=f"up{l}_"),
           [(W, wn), (d, L(P)), (v, L(n)), (R["nlr"], 1)], [(W, wn)], fma_wb=True)
    return o.ops


def _mask_ops(cfg, mlp, al, l) -> list:
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    o = _Ops(cfg, al, l)
    R = o.R
    n = mlp.shape(l)[1]
    e, a, dm = R[f"e{l}"], R[f"a{l}"], R[f"dm{l}"]
    o.kern(f"mask{l}", "relu_mask", lambda b: emit_relu_mask(b, cfg, L(n), e, a, dm, layout="diag", name=f"mk{l}_"),
           [(e, L(n)), (a, L(n))], [(dm, L(n))])
    return o.ops


def _add_ops(cfg, mlp, al, l, last) -> list:
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    o = _Ops(cfg, al, l)
    R = o.R
    n = mlp.shape(l)[1]
    one = Scalar(R["one"].bank, R["one"].base)
    o.kern(f"add{l}", "axpy", lambda b: emit_axpy(b, cfg, L(n), one, R[f"er{l}"], R[f"e{l}"], layout="diag",
                                                  name=f"ad{l}_"),
           [(R[f"er{l}"], L(n)), (R[f"e{l}"], L(n)), (R["one"], 1)], [(R[f"e{l}"], L(n))], fma_wb=True)
    return o.ops + (_mask_ops(cfg, mlp, al, l) if last else [])


@dataclass
class Section:
    name: str
    kind: str                     #: "compute" or "ring"
    pcs: dict                     #: core -> start address
    ins: dict                     #: core -> instructions issued (without the HALT)
    ops: dict = field(default_factory=dict)   #: compute: core -> ops
    cycles: int = 0


def _segments(hcfg, mlp, allocs, parts, l, fwd):
    """The vector moves into layer ``l`` (forward: a_l from layer l-1's panels) or into
    layer ``l`` from layer l+1 (backward: g_l, panels of dm_{l+1}): ``(s, r, P, src, dst)``
    with ``src`` / ``dst`` regions (offsets applied)."""
    out = []
    if fwd:
        for s, r0, rows in parts[l - 1]:
            for r, _, _ in parts[l]:
                nr_s, nr_r = hcfg.core_cfg(s).nr, hcfg.core_cfg(r).nr
                out.append((s, r, padded_len(hcfg, rows), allocs[s].items[f"z{l - 1}"].region,
                            _at(allocs[r].items[f"a{l}"].region, r0 // nr_r)))
    else:
        s = parts[l + 1][-1][0]
        nr_s = hcfg.core_cfg(s).nr
        for r, r0, rows in parts[l]:
            out.append((s, r, padded_len(hcfg, rows), _at(allocs[s].items[f"dm{l + 1}"].region, r0 // nr_s),
                        allocs[r].items[f"g{l}"].region))
    return out


def _plan(hcfg, mlp, parts, allocs, spad) -> list:
    """The step's sections, in order, unassembled: ("compute", name, {core: ops}) or
    ("ring", name, (s, r, P, src, dst)); ``spad``: per core its paged panels."""
    nl = mlp.n_layers
    plan = []
    for l in range(nl):
        copies = {}
        if l >= 1:
            bcast = {}
            for s, r, P, src, dst in _segments(hcfg, mlp, allocs, parts, l, True):
                if s == r:
                    copies.setdefault(r, []).append((src, dst, P // hcfg.core_cfg(r).nr))
                else:
                    bcast.setdefault((s, P, src), []).append((r, dst))
            for (s, P, src), rd in bcast.items():    # one broadcast per panel to the cores that need it
                rs = [r for r, _ in rd]
                plan.append(("ring", f"Ta{l}.{s}-{'.'.join(map(str, rs))}", (s, rs, P, src, [d for _, d in rd])))
        plan.append(("compute", f"F{l}", {c: _forward_ops(hcfg.core_cfg(c), mlp, allocs[c], l, P, copies.get(c, []),
                                                          spad[c].get(l)) for c, _, P in parts[l]}))
    for l in range(nl - 2, -1, -1):
        copies = {}
        for s, r, P, src, dst in _segments(hcfg, mlp, allocs, parts, l, False):
            if s == r:
                copies.setdefault(r, []).append((src, dst, P // hcfg.core_cfg(r).nr))
            else:
                plan.append(("ring", f"Tg{l}.{s}-{r}", (s, r, P, src, dst)))
        k = len(parts[l])
        plan.append(("compute", f"B{l}", {c: _backward_ops(hcfg.core_cfg(c), mlp, allocs[c], l, P,
                                                           allocs[c].items[f"g{l}"].region, "diag", k == 1,
                                                           copies.get(c, []), spad[c].get(l))
                                          for c, _, P in parts[l]}))
        if l >= 1:
            for j in range(1, k):
                s, r = parts[l][j - 1][0], parts[l][j][0]
                n = mlp.shape(l)[1]
                plan.append(("ring", f"R{l}.{j}", (s, r, padded_len(hcfg, n), allocs[s].items[f"e{l}"].region,
                                                   allocs[r].items[f"er{l}"].region)))
                plan.append(("compute", f"A{l}.{j}", {r: _add_ops(hcfg.core_cfg(r), mlp, allocs[r], l, j == k - 1)}))
    return plan


def _assemble(hcfg, plan) -> tuple:
    """Every section assembled at each core's next free address (address 0: a HALT).
    Returns (sections, images)."""
    n = hcfg.cores
    images = {}
    for k in range(n):
        b = Builder(hcfg.core_cfg(k))
        b.halt()
        images[k] = list(b.build().words())
    over = max(c.run_overhead for c in hcfg.group_cfgs)
    out = []
    for kind, name, body in plan:
        pcs, ins = {}, {}
        if kind == "compute":
            for c, ops in body.items():
                cfg = hcfg.core_cfg(c)
                if len(_split_ops(cfg, ops)) > 1:
                    raise TrainCompileError(f"core {c}: section {name} needs more than one microprogram")
                prog, ins[c] = _build(cfg, ops, _gaps(cfg, ops), origin=len(images[c]))
                pcs[c] = len(images[c])
                images[c] += list(prog.words())
        else:
            s, r, P, src, dst = body
            dst = [(d.bank, d.base) for d in dst] if isinstance(r, list) else (dst.bank, dst.base)
            lines = transfer_lines(hcfg, s, r, P, (src.bank, src.base), dst)
            for c, ls in lines.items():
                cfg = hcfg.core_cfg(c)
                pcs[c] = len(images[c])
                images[c] += list(assemble("\n".join(_fold(cfg, ls) + ["halt"]), cfg, origin=pcs[c]).words())
                ins[c] = len(ls)
        out.append(Section(name, kind, pcs, ins, body if kind == "compute" else {}, max(ins.values()) + over))
    for k in range(n):
        depth = hcfg.core_cfg(k).ucode_depth
        if len(images[k]) > depth:
            raise TrainCompileError(f"core {k}: the step's sections need {len(images[k])} microcode words, "
                                    f"it holds {depth}")
    return out, images


@dataclass
class SplitTrainProgram:
    hcfg: object
    mlp: MLP
    placement: Placement
    parts: list                   #: per layer, [(core, first row, rows)]
    allocs: dict
    sections: list
    images: dict
    spad: dict = field(default_factory=dict)   #: core -> {layer: SpadPanel}, the panels paged from its scratchpad
    meta: dict = field(default_factory=dict)

    @property
    def cores(self) -> list:
        """Per layer, the cores of its panels."""
        return [[c for c, _, _ in ps] for ps in self.parts]

    def phase_cycles(self) -> dict:
        return {s.name: s.cycles for s in self.sections}

    def page_rows(self) -> dict:
        """``(layer, panel) -> ((first row, rows), ...)``: the pages of every paged panel
        in rows of the padded panel (:class:`sw.golden_train_hetero.GoldenHeteroSplit`)."""
        return {(l, j): self.spad[c][l].row_pages(self.hcfg.core_cfg(c).nr)
                for l, ps in enumerate(self.parts) for j, (c, _, _) in enumerate(ps) if l in self.spad.get(c, {})}

    def step_cycles(self) -> int:
        return sum(s.cycles for s in self.sections)

    def describe(self) -> str:
        lines = [f"SGD step of {self.mlp.describe()}, layers split across cores: " + ", ".join(
            f"layer {l} on cores {[c for c, _, _ in ps]}" for l, ps in enumerate(self.parts))]
        for s in self.sections:
            lines.append(f"  {s.name:<10} {s.kind:<7} cores {sorted(s.pcs)}: {s.cycles} cycles")
        lines.append(f"  {self.step_cycles()} cycles per step")
        return "\n".join(lines)

    def init(self, model, weights) -> None:
        for c, al in self.allocs.items():
            cfg = self.hcfg.core_cfg(c)
            wb = weight_bits(self.mlp, cfg.fmt, weights)
            items, paged = [], {}
            for l, ps in enumerate(self.parts):
                for k, r0, rows in ps:
                    if k == c and l in self.spad.get(c, {}):
                        paged[l] = pack_matrix(wb[l][r0:r0 + rows], cfg.nr)
                    elif k == c:
                        items.append((al.items[f"W{l}"].region, pack_matrix(wb[l][r0:r0 + rows], cfg.nr)))
            for name, val in (("nlr", -self.mlp.lr), ("m1", -1.0), ("one", 1.0)):
                if name in al.items:
                    v = int(cfg.fmt.from_float(np.array([val]))[0])
                    items.append((al.items[name].region, np.full((cfg.nr, cfg.nr, 1), v, dtype=cfg.fmt.np_uint)))
            load_regions(model, cfg, c, items)
            fill_spad(model, cfg, c, self.spad.get(c, {}), paged)
        for c in range(self.hcfg.cores):
            model.load(self.images[c], 0, core=c)
        for fmt in {self.hcfg.core_cfg(c).fmt for c in self.allocs}:
            if fmt.to_float(fmt.from_float(np.array([-self.mlp.lr])))[0] == 0:
                raise TrainCompileError(f"learning rate {self.mlp.lr} rounds to zero in {fmt}")

    def run_step(self, model, x, t, check_cycles: bool = True):
        from sw.train_hetero import HeteroStep

        mlp, h = self.mlp, self.hcfg
        fmt = h.core_cfg(self.parts[-1][0][0]).fmt
        vec = {"t": vector_bits(fmt, t, mlp.n_out)}
        model.clear_counters()
        runs, total = [], 0
        for s in self.sections:
            pcs = [s.pcs.get(c, 0) for c in range(h.cores)]
            hin = [[] for _ in range(h.cores)]
            for c, ops in s.ops.items():
                cfg = h.core_cfg(c)
                for op in ops:
                    if op.kind == "load":
                        v = vector_bits(cfg.fmt, x, mlp.n_in) if op.data == "a0" else vec[op.data]
                        hin[c] += vector_beats(cfg, v, op.words)
            res = model.run(pcs, hin)
            for c, ops in s.ops.items():
                cfg, pos = h.core_cfg(c), 0
                for op in ops:
                    if op.kind == "unload":
                        out = res.cores[c].out
                        v = decode_diag_beats(cfg, out[pos:pos + op.words], op.words * cfg.nr)
                        vec[op.data] = v[:op.info["n"]].copy()
                        pos += op.words
            if check_cycles and res.cycles != s.cycles:
                raise AssertionError(f"section {s.name}: {res.cycles} cycles, predicted {s.cycles}")
            runs.append((s.name, sorted(s.pcs), res.cycles))
            total += res.cycles
        ctrs = model.counters
        for c in ctrs:
            if c.get("mem_conflict") or c.get("rf_conflict"):
                raise AssertionError(f"SRAM / register write conflicts: {c['mem_conflict']}, {c['rf_conflict']}")
        d = fmt.to_float(vec["d"])
        return HeteroStep(mse_loss(d), d + fmt.to_float(vec["t"]), total, runs, ctrs)

    def weights(self, model, padded: bool = False, memory=None, scratchpad=None) -> list:
        """Every layer's weights, its panels read back and stacked (``padded``: each panel
        with its kernel padding, as :meth:`GoldenHeteroSplit.weights`). ``memory(k,
        bank)`` and ``scratchpad(k, base, n)`` (core ``k``'s beats as integers) read a
        core; the defaults read the fast engine's."""
        from arch.lanes import pack_beats

        memory = memory or (lambda k, b: model.cores[k].memory(b))
        scratchpad = scratchpad or (lambda k, base, n: pack_beats(model.cores[k].state.spad[base:base + n],
                                                                   self.hcfg.core_cfg(k).fmt.width))
        out = []
        for l, ps in enumerate(self.parts):
            n = self.mlp.shape(l)[1]
            blocks = []
            for c, _, rows in ps:
                cfg = self.hcfg.core_cfg(c)
                sp = self.spad.get(c, {}).get(l)
                if sp is not None:
                    local = spad_local(cfg, sp, scratchpad(c, sp.base, sp.beats(cfg.nr)))
                else:
                    it = self.allocs[c].items[f"W{l}"]
                    local = memory(c, it.region.bank)[:, :, it.region.base:it.region.base + it.words]
                m2, n2 = (local_len(rows, cfg.nr) * cfg.nr, local_len(n, cfg.nr) * cfg.nr) if padded else (rows, n)
                blocks.append(unpack_matrix(local, m2, n2))
            out.append(np.concatenate(blocks, axis=0))
        return out


def compile_split(hcfg, mlp: MLP, placement: Placement) -> SplitTrainProgram:
    """Compile batch-1 SGD of ``mlp`` on ``hcfg``, each layer on the ``cores`` of its
    placement entry (see the module docstring). Raises :class:`PlacementError` or
    :class:`TrainCompileError` (one line)."""
    if mlp.n_layers < 2:
        raise TrainCompileError("a heterogeneous step needs at least one hidden layer")
    if mlp.loss != "mse":
        raise TrainCompileError(f"loss {mlp.loss!r}: the heterogeneous compiler trains with MSE only")
    parts = layer_parts(hcfg, mlp, placement)
    allocs, spad = _allocate(hcfg, mlp, parts)
    sections, images = _assemble(hcfg, _plan(hcfg, mlp, parts, allocs, spad))
    return SplitTrainProgram(hcfg, mlp, placement, parts, allocs, sections, images, spad)
