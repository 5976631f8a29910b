"""Shared check of the hazard tests: a program compiled without some of its NOPs must
train differently from its golden trainer (so the NOPs it leaves out are needed)."""

from sim.sessions import CoreSession
from sw.train import init_weights


def mismatches(bad, gold, mlp, cfg, batches, seed: int) -> int:
    """Load ``init_weights(mlp, cfg.fmt, seed)`` into a fast core session and ``gold``
    (built from the same weights by the caller), run ``bad`` and ``gold`` on each of
    ``batches`` (``(x, t)`` pairs) and return the number of differing weight words plus
    the steps whose cycle or loss check failed."""
    s = CoreSession(cfg, "fast")
    bad.init(s, init_weights(mlp, cfg.fmt, seed))
    diff = 0
    for x, t in batches:
        try:
            bad.run_step(s, x, t, check_cycles=False)
        except AssertionError:
            diff += 1
        gold.step(x, t)
        diff += sum(int((g != w).sum()) for g, w in zip(bad.weights_from_session(s, padded=True),
                                                         gold.weights(padded=True)))
    return diff
