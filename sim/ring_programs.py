"""Stand-alone ring collective programs aligned on the chip model.

A broadcast is stall-free with no slack only when each receiver starts in time for its
first beat; :func:`align` finds those start delays by scheduling the images on the fast
chip model, and :func:`emit_broadcast` returns the aligned images of
:func:`sw.ring.broadcast_images`.
"""

from __future__ import annotations

import numpy as np

from arch.config import RING_HOP_CYCLES
from sim.chip_model import ChipModel, RingStallError
from sw.ring import RingError, broadcast_images

__all__ = ["align", "emit_broadcast"]


def align(cfg, images_of, max_rounds: int | None = None):
    """Find per-core waits (nops before the first ring instruction) that make a ring
    program stall-free with no slack: ``images_of(waits) -> images``. Starts from no wait
    and delays each receiver until its first take is exactly in time; raises
    :class:`RingError` if that does not converge."""
    c = cfg.cores
    waits = [0] * c
    probe = ChipModel(cfg, "fast")
    for _ in range(max_rounds or 2 * c + 2):
        imgs = images_of(waits)
        for k in range(c):
            probe.load(imgs[k], core=k)
        sched = probe.ring_schedule([0] * c)
        changed = False
        for k in range(c):
            s = sched[k][1]
            j = (k + 1) % c
            r = sched[j][0]
            if len(s) and len(r) == len(s):
                need = int(np.max(s + RING_HOP_CYCLES - r))
                if need > 0:
                    waits[j] += need
                    changed = True
        if not changed:
            try:
                probe.check_stall_free([0] * c)
            except RingStallError as e:
                raise RingError(f"no stall-free alignment: {e}") from None
            return imgs
    raise RingError("ring alignment did not converge")


def emit_broadcast(cfg, m: int, root: int = 0, src: tuple[str, int] = ("a", 0),
                   dst: tuple[str, int] = ("a", 0)) -> list:
    """Core ``root``'s segment ``src`` to ``dst`` on every other core: one image per
    core, aligned stall-free (:func:`sw.ring.broadcast_images`, :func:`align`)."""
    broadcast_images(cfg, m, root, src, dst)        # bad arguments fail before any alignment
    return align(cfg, lambda waits: broadcast_images(cfg, m, root, src, dst, waits))
