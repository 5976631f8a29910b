"""Memory and kernels of one core's phases in a heterogeneous SGD step
(:mod:`sw.train_hetero`): the regions of the layers a core holds, and the ops of the
forward phase ``F`` and the backward phase ``B`` of a layer, with the vectors between
layers moved by the host (``transfers="host"``) or over the ring
(``transfers="ring"``, :mod:`sw.train_hetero_ring`)."""

from __future__ import annotations

from sw.kernels import Scalar, emit_axpy, emit_gemv, emit_relu, emit_relu_mask, emit_rank1
from sw.layout import local_len
from sw.mlp import MLP
from sw.train_alloc import Allocator
from sw.train_hetero_ring import padded_len
from sw.transfer import load_programs
from sw.train_host import TrainCompileError
from sw.train_ops import Op
from sw.train_vectors import emit_load_vector, emit_unload_diag

__all__ = ["allocate", "phase_ops"]


def _other(b):
    return "b" if b == "a" else "a"


def allocate(hcfg, mlp: MLP, cores: list, ring: bool) -> dict:
    """Core -> :class:`Allocator` of the layers it holds. Ring transfers: a vector sent
    or received has ``padded_len / nr`` words (the transfer's whole beats); a vector
    between two layers of the same core is one region (the next layer reads the
    previous one's output where it is)."""
    nl = mlp.n_layers
    allocs = {}
    for k in sorted(set(cores)):
        cfg = hcfg.core_cfg(k)
        L = lambda n, cfg=cfg: local_len(n, cfg.nr)            # noqa: E731
        T = lambda n, cfg=cfg: max(L(n), padded_len(hcfg, n) // cfg.nr)   # noqa: E731
        al = Allocator(cfg)
        mine = [l for l in range(nl) if cores[l] == k]
        for l in mine:        # the weights first, bank A first
            m, n = mlp.shape(l)
            wb = "a" if al.next["a"] + L(m) * L(n) <= al.depth("a") else "b"
            al.alloc(f"W{l}", L(m) * L(n), f"weights of layer {l} ({m} x {n})", bank=wb)
        wbank = {l: al.items[f"W{l}"].region.bank for l in mine}
        for l in mine:
            m, n = mlp.shape(l)
            f = {wbank[l]}
            if l == 0 or not ring:
                al.alloc(f"a{l}", L(n), f"input a{l} of layer {l} (cols, loaded)", forbid=f)
            elif cores[l - 1] == k:
                al.alias(f"a{l}", f"z{l - 1}", al.items[f"z{l - 1}"].words, f"input a{l}: layer {l - 1}'s output")
            else:
                al.alloc(f"a{l}", T(n), f"input a{l} of layer {l} (diag, from the ring)", forbid=f)
            if ring and l >= 1:
                al.alloc(f"c{l}", L(n) + 1, f"cols copy of a{l} (GEMV broadcast; rank-1 v)", forbid=f)
            nxt = {wbank[l + 1]} if l + 1 in wbank else f        # the next layer reads it as its x
            al.alloc(f"z{l}", T(m) if ring and l < nl - 1 else L(m), f"output of layer {l} (rows)", forbid=nxt)
            if l == nl - 1:
                zb = al.items[f"z{l}"].region.bank
                al.alloc("t", L(m), "target (rows, loaded)", bank=_other(zb))
                al.alloc("m1", 1, "scalar -1")
        for l in sorted(mine, reverse=True):
            m, n = mlp.shape(l)
            f = {wbank[l]}
            if l < nl - 1:
                if not ring:
                    al.alloc(f"g{l}", L(m), f"delta at layer {l}'s output (rows, loaded)", forbid=f)
                elif cores[l + 1] == k:
                    al.alias(f"g{l}", f"dm{l + 1}", al.items[f"dm{l + 1}"].words, f"delta: layer {l + 1}'s mask")
                else:
                    al.alloc(f"g{l}", T(m), f"delta at layer {l}'s output (diag, from the ring)", forbid=f)
                if ring and l >= 1:
                    al.alloc(f"dc{l}", L(m) + 1, f"rows copy of g{l} (transposed-GEMV broadcast)", forbid=f)
            if l >= 1:
                prev = {wbank[l - 1]} if l - 1 in wbank else f    # the previous layer reads it as its d
                al.alloc(f"e{l}", L(n), f"W{l}^T d (cols)", forbid=f)
                al.alloc(f"dm{l}", T(n) if ring else L(n), f"e{l} * relu'(a{l}) (diag)", forbid=prev)
        al.alloc("nlr", 1, "scalar -lr")
        if not al.fits():
            raise TrainCompileError(f"core {k} ({cfg.nr}x{cfg.nr}): layers {mine} need {al.next['a']} + "
                                    f"{al.next['b']} words per PE, it has {cfg.mem_a_words} + {cfg.mem_b_words}")
        allocs[k] = al
    return allocs


def phase_ops(cfg, mlp: MLP, al: Allocator, l: int, phase: str, ring: bool) -> list:
    """The ops of phase ``F`` (forward; on the output layer with its loss and backward)
    or ``B`` (backward and update) of layer ``l`` on a core of ``cfg``."""
    nl = mlp.n_layers
    L = lambda n: local_len(n, cfg.nr)                    # noqa: E731
    R = {k: v.region for k, v in al.items.items()}
    nlr = Scalar(R["nlr"].bank, R["nlr"].base)
    m, n = mlp.shape(l)
    W, a, z = R[f"W{l}"], R[f"a{l}"], R[f"z{l}"]
    v = R[f"c{l}"] if ring and l >= 1 else a                 # the input in the cols layout
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

    def backward(d, dlay, dcopy):
        if l >= 1:
            e, dm = R[f"e{l}"], R[f"dm{l}"]
            wr = [(e, L(n))] + ([(dcopy, L(m) + 1)] if dcopy is not None else [])
            kern(f"gemv_t{l}", "gemv_t", lambda b: emit_gemv(b, cfg, m, n, W, d, e, trans=True, x_layout=(
                "diag" if dlay == "diag" else None), x_copy=dcopy, name=f"bw{l}_"), [(W, wn), (d, L(m))], wr)
            kern(f"mask{l}", "relu_mask", lambda b: emit_relu_mask(b, cfg, L(n), e, a, dm, layout="diag",
                                                                   name=f"mk{l}_"),
                 [(e, L(n)), (a, L(n))], [(dm, L(n))])
            if not ring:
                unload(dm, f"g{l - 1}", L(n), n)
        kern(f"rank1_{l}", "rank1", lambda b: emit_rank1(b, cfg, m, n, W, d, v, alpha=nlr, u_layout=dlay,
                                                         v_layout="cols", name=f"up{l}_"),
             [(W, wn), (d, L(m)), (v, L(n)), (R["nlr"], 1)], [(W, wn)], fma_wb=True)

    if phase == "F":
        if l == 0 or not ring:
            load(a, f"a{l}", L(n), "cols")
            kern(f"gemv{l}", "gemv", lambda b: emit_gemv(b, cfg, m, n, W, a, z, name=f"fw{l}_"),
                 [(W, wn), (a, L(n))], [(z, L(m))])
        else:
            c = R[f"c{l}"]
            kern(f"gemv{l}", "gemv", lambda b: emit_gemv(b, cfg, m, n, W, a, z, x_layout="diag", x_copy=c,
                                                         name=f"fw{l}_"),
                 [(W, wn), (a, L(n))], [(z, L(m)), (c, L(n) + 1)])
        if l < nl - 1:
            kern(f"relu{l}", "relu", lambda b: emit_relu(b, cfg, L(m), z, z, name=f"re{l}_"), [(z, L(m))], [(z, L(m))])
            if not ring:
                unload(z, f"a{l + 1}", L(m), m)
            return ops
        m1 = Scalar(R["m1"].bank, R["m1"].base)
        load(R["t"], "t", L(m), "rows")
        kern("loss_grad", "axpy", lambda b: emit_axpy(b, cfg, L(m), m1, R["t"], z, name="lg_"),
             [(R["t"], L(m)), (z, L(m)), (R["m1"], 1)], [(z, L(m))], fma_wb=True)
        unload(z, "d", L(m), m)
        backward(z, "rows", None)
        return ops
    g = R[f"g{l}"]
    if ring:
        backward(g, "diag", R.get(f"dc{l}"))
    else:
        load(g, f"g{l}", L(m), "rows")
        backward(g, "rows", None)
    return ops


def load_regions(model, cfg, k: int, items) -> None:
    """Load ``items`` (``(region, local words)`` pairs) into core ``k`` of ``model`` with
    as few load programs as its microcode holds (``1 + 3 nr`` words per region)."""
    for words, data in load_programs(cfg, items):
        model.load(words, 0, core=k)
        model.cores[k].run(0, data, ring_in=())
