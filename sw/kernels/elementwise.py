"""Elementwise kernels: ReLU, copy, ReLU mask, axpy and scale, and their instruction
counts (:func:`elementwise_cost`)."""

from __future__ import annotations

from sw.asm import mac, mask, mov, mul, pred, relu
from sw.collectives import Frag, Region
from sw.kernels.common import KernelInfo, Scalar, _finish, _need


def _stream(f: Frag, n: int, k: int, elem, ctls, level: int, name: str) -> None:
    """``n`` elements of ``k`` instructions each (``elem(i, agu)`` -> ``k`` slot lists,
    ``agu`` the AGU name to add to addresses or None). The first elements are emitted
    straight with immediate addresses and carry the control items ``ctls``, the next
    one's last instruction is the loop instruction, the rest run in a zero-overhead loop
    whose body is one element. Exactly ``n * k`` instructions."""
    e0 = -(-len(ctls) // k)
    if n < e0 + 2:
        for i in range(n):
            for sl in elem(i, None):
                f.ins(*sl)
        return
    free = []
    for i in range(e0 + 1):
        free += [f.ins(*sl) for sl in elem(i, None)]
    for c in ctls:
        f.attach(c, free[:-1])
    f.open_loop(free[-1], name, n - e0 - 1, level)
    for sl in elem(e0 + 1, ctls[0][1]):
        f.ins(*sl)
    f.close_loop()


def _ew_common(cfg, n, regions, layout):
    nr = cfg.nr
    _need(nr >= 2, "kernels need nr >= 2")
    _need(n >= 1, "empty operand")
    for what, r in regions.items():
        if r is not None:
            r.check(cfg, n, what)
    _need(layout in (None, "all", "diag"), f"layout must be None/'all' (every PE) or 'diag', got {layout!r}")
    pr = [pred("diag", 0)] if layout == "diag" else []
    gate = "pred" if pr else "all"
    return pr, gate


def elementwise_cost(kind: str, n: int, *, two_banks: bool = True) -> int:
    """Exact instruction count of the elementwise kernels for ``n`` local words:
    ``relu`` and ``copy``: ``n + 1``; ``relu_mask``: ``k * n + 1``; ``axpy``: ``1 + k * n``;
    ``scale``: ``1 + n``, with ``k = 1`` when the two streamed operands are in different
    banks (``two_banks``), else 2."""
    k = 1 if two_banks else 2
    return {"relu": n + 1, "copy": n + 1, "relu_mask": k * n + 1, "axpy": 1 + k * n, "scale": 1 + n}[kind]


def _unary(b, cfg, n: int, src: Region, dst: Region, layout, agu: str, name: str, kind: str, unit) -> KernelInfo:
    """``dst[i] = unit(src[i])`` on the move unit (``relu`` or ``mov``): read and
    operate, write of the previous element; ``n + 1`` instructions."""
    pr, gate = _ew_common(cfg, n, {"src": src, "dst": dst}, layout)
    src, dst = src.bind(cfg), dst.bind(cfg)
    f = Frag()

    def elem(i, agu_):
        sl = [src.rd(i, agu=agu_, gate=gate), unit("r0", src.src)] + pr
        if i >= 1:
            sl.append(dst.wr("r0", i - 1, agu=agu_))
        return [sl]

    _stream(f, n, 1, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    f.ins(dst.wr("r0", n - 1), *pr)
    _finish(b, f)
    return KernelInfo(kind, f.count(), 0, {"k": 1})


def emit_relu(b, cfg, n: int, src: Region, dst: Region, *, layout: str | None = None, agu: str = "g0",
              name: str = "relu") -> KernelInfo:
    """``dst[i] = relu(src[i])`` for the ``n`` local words of every PE (``layout="diag"``:
    of the diagonal PEs only, for a vector in the diag layout). In place when
    ``dst == src``. One element per instruction on the move unit (read, ReLU, write of the
    previous element), ``n + 1`` instructions."""
    return _unary(b, cfg, n, src, dst, layout, agu, name, "relu", relu)


def emit_copy(b, cfg, n: int, src: Region, dst: Region, *, layout: str | None = None, agu: str = "g0",
              name: str = "copy") -> KernelInfo:
    """``dst[i] = src[i]`` for the ``n`` local words of every PE (``layout="diag"``: of the
    diagonal PEs only), bit for bit (the move unit). ``dst`` must not overlap ``src``
    unless equal. One element per instruction, ``n + 1`` instructions, as :func:`emit_relu`."""
    return _unary(b, cfg, n, src, dst, layout, agu, name, "copy", mov)


def emit_relu_mask(b, cfg, n: int, delta: Region, z: Region, dst: Region, *, layout: str | None = None,
                   agu: str = "g0", name: str = "rmask") -> KernelInfo:
    """``dst[i] = delta[i] if z[i] > 0 else +0`` (backpropagation through a ReLU:
    ``delta * relu'(z)``; ``z`` the pre-activation or the activation). One element per
    instruction when ``delta`` and ``z`` are in different banks, else two. ``n * k + 1``
    instructions."""
    pr, gate = _ew_common(cfg, n, {"delta": delta, "z": z, "dst": dst}, layout)
    delta, z, dst = delta.bind(cfg), z.bind(cfg), dst.bind(cfg)
    k = 1 if delta.bank != z.bank else 2
    f = Frag()

    def elem(i, agu_):
        wr = [dst.wr("r0", i - 1, agu=agu_)] if i >= 1 else []
        if k == 1:
            return [[delta.rd(i, agu=agu_, gate=gate), z.rd(i, agu=agu_, gate=gate),
                     mask("r0", delta.src, z.src)] + wr + pr]
        return [[z.rd(i, agu=agu_, gate=gate), mov("r1", z.src)] + pr,
                [delta.rd(i, agu=agu_, gate=gate), mask("r0", delta.src, "r1")] + wr + pr]

    _stream(f, n, k, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    f.ins(dst.wr("r0", n - 1), *pr)
    _finish(b, f)
    return KernelInfo("relu_mask", f.count(), 0, {"k": k})


def _load_scalar(f, cfg, alpha: Scalar, r, pr):
    sreg = alpha.region.bind(cfg)
    return f.ins(sreg.rd(0), mov(r, sreg.src), *pr)


def emit_axpy(b, cfg, n: int, alpha: Scalar, x: Region, y: Region, *, layout: str | None = None,
              agu: str = "g0", name: str = "axpy", accumulate: bool = True) -> KernelInfo:
    """``y[i] = alpha * x[i] + y[i]`` (``mac``: the product rounded, then the sum) for the
    ``n`` local words; the FMA writes ``y`` back in place. One element per instruction
    when ``x`` and ``y`` are in different banks, else two; plus one instruction loading
    ``alpha``. ``accumulate=False``: ``y[i] = alpha * x[i]`` (``mul``; ``y`` not read),
    in the same instructions."""
    pr, gate = _ew_common(cfg, n, {"x": x, "y": y}, layout)
    x, y = x.bind(cfg), y.bind(cfg)
    k = 1 if x.bank != y.bank else 2
    f = Frag()
    _load_scalar(f, cfg, alpha, "r2", pr)

    op = mac if accumulate else mul

    def elem(i, agu_):
        if k == 1:
            return [[x.rd(i, agu=agu_, gate=gate), y.rd(i, agu=agu_, gate=gate, read=accumulate),
                     op(y.src, "r2", x.src)] + pr]
        return [[x.rd(i, agu=agu_, gate=gate), mov("r1", x.src)] + pr,
                [y.rd(i, agu=agu_, gate=gate, read=accumulate), op(y.src, "r2", "r1")] + pr]

    _stream(f, n, k, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    _finish(b, f)
    return KernelInfo("axpy", f.count(), 0, {"k": k})


def emit_scale(b, cfg, n: int, alpha: Scalar, x: Region, dst: Region | None = None, *,
               layout: str | None = None, agu: str = "g0", name: str = "scale") -> KernelInfo:
    """``dst[i] = x[i] * alpha`` (``dst`` defaults to ``x``: in place; otherwise ``dst``
    must be in the other bank). One element per instruction (the FMA writes the product
    back to SRAM), plus one instruction loading ``alpha``."""
    dst = x if dst is None else dst
    pr, gate = _ew_common(cfg, n, {"x": x, "dst": dst}, layout)
    _need(dst == x or dst.bank != x.bank, "an out-of-place scale needs dst in the other bank")
    x, dst = x.bind(cfg), dst.bind(cfg)
    f = Frag()
    _load_scalar(f, cfg, alpha, "r2", pr)

    def elem(i, agu_):
        if dst == x:
            return [[x.rd(i, agu=agu_, gate=gate), mul(x.src, x.src, "r2")] + pr]
        return [[x.rd(i, agu=agu_, gate=gate), dst.rd(i, agu=agu_, read=False), mul(dst.src, x.src, "r2")] + pr]

    _stream(f, n, 1, elem, [("agu_base", agu, 0), ("agu_stride", agu, 0, 1)], 0, name)
    _finish(b, f)
    return KernelInfo("scale", f.count(), 0, {"k": 1})
