"""Right-sizing, buddy packing and concurrent runs of training jobs on one chip
(``caterpillar share``; ``docs/chip.md``, "Partitions" and "Sharing a chip").

1. **Profile**: a job's step on ``cfg.replace(cores=k)`` (``k`` a power of two, from the
   whole chip down) on the fast chip engine (:func:`sim.step_measure.measure_step`):
   cycles (host turnaround included) and energy. Its *exclusive* step is its fastest on
   the whole chip (a job alone may use any group of it).
2. **Right-size**: the fewest cores whose step is within ``slowdown`` x the exclusive
   step (or the job's requested ``cores``).
3. **Pack**: groups placed largest first at the lowest free aligned offset (buddy
   allocation: sizes are powers of two, so this never fragments); if they do not fit,
   the group whose halving leaves the smallest makespan is halved, repeatedly; spare
   cores then go to the job that finishes last (its group doubled while that shortens
   its run and the groups fit), then to the others.
4. **Run**: every job's program, compiled for its group's size, drives its
   :class:`sim.sessions.GroupSession` of one :class:`sim.sessions.SharedChip`; a job
   that fails (a fault of its program) is stopped and reported, the others go on.

Energy rule (:func:`sim.power.partition_energy`): a job is charged its cores' dynamic
energy (its counters) plus the leakage
of its ``k`` cores over its own run time; the leakage of the cores and time no job
holds (idle cores, groups that finished early) is reported as ``idle_leakage`` and
counted in the aggregate. Time sharing (the baseline): the jobs one after another, each
with its exclusive step, the whole chip leaking all along.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from arch.errors import InputError
from arch.partition import Partition

__all__ = ["Profile", "profile_job", "right_size", "pack", "run_shared", "share", "leak_pj_per_core_cycle"]


@dataclass
class Profile:
    """A job's measured step per group size: ``{k: (cycles, energy_pj, flops)}`` (``None``:
    does not compile at that size)."""

    steps: dict = field(default_factory=dict)

    def cycles(self, k):
        s = self.steps.get(k)
        return None if s is None else s[0]

    def exclusive(self) -> tuple[int, int]:
        """``(k, cycles)`` of the fastest size."""
        ok = [(c[0], k) for k, c in self.steps.items() if c is not None]
        if not ok:
            raise InputError("the network compiles for no group size of this chip")
        c, k = min(ok)
        return k, c


def _sizes(cores: int) -> list[int]:
    out, k = [], 2
    while k <= cores:
        out.append(k)
        k *= 2
    return out


def profile_job(cfg, job, sizes) -> Profile:
    """Measure one step of ``job`` on ``cfg.replace(cores=k)`` for each ``k`` in ``sizes``."""
    from sim.step_measure import measure_step
    from sw.train import TrainCompileError

    prof = Profile()
    for k in sizes:
        try:
            sm = measure_step(cfg.replace(cores=k), job.mlp, job.method, golden=False, ucode_from_program=False)
        except TrainCompileError:
            prof.steps[k] = None
            continue
        prof.steps[k] = (int(sm.counters["cycles"]), float(sum(sm.report.energy_pj.values())), int(sm.flops))
    return prof


def right_size(job, prof: Profile, slowdown: float) -> int:
    """The fewest cores keeping ``job``'s step within ``slowdown`` x its exclusive step
    (its requested ``cores`` if given)."""
    if job.cores is not None:
        if prof.cycles(job.cores) is None:
            raise InputError(f"job {job.name}: the network does not fit {job.cores} cores")
        return job.cores
    _, best = prof.exclusive()
    ok = [k for k, s in prof.steps.items() if s is not None and s[0] <= slowdown * best]
    return min(ok)


def pack(cores: int, sizes: list[int], shrink=None) -> tuple[list[int], Partition]:
    """Buddy placement of groups of ``sizes`` (powers of two) on ``cores`` cores, largest
    first. While they do not fit, ``shrink(sizes)`` gives the index of the group to halve
    (``None``: none can be; raises :class:`InputError`). Returns the sizes granted and
    the :class:`Partition` (groups in job order)."""
    sizes = list(sizes)
    while sum(sizes) > cores:
        i = shrink(sizes) if shrink is not None else None
        if i is None:
            raise InputError(f"the jobs need at least {sum(sizes)} cores together; the chip has {cores}")
        sizes[i] //= 2
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    first, at = [0] * len(sizes), 0
    for i in order:                  # descending powers of two: every offset stays aligned
        first[i] = at
        at += sizes[i]
    return sizes, Partition.of(cores, [(first[i], sizes[i]) for i in range(len(sizes))])


def grow(cores: int, sizes: list[int], jobs, run_time) -> list[int]:
    """Spare cores to the jobs, the one that finishes last first: double a group while
    the groups still fit and its job's run gets shorter (requested sizes are kept)."""
    sizes = list(sizes)
    while True:
        times = [run_time(i, k) for i, k in enumerate(sizes)]
        for i in sorted(range(len(sizes)), key=lambda x: -times[x]):
            d = sizes[i] * 2
            t = run_time(i, d) if d <= cores and sum(sizes) + sizes[i] <= cores else None
            if jobs[i].cores is None and t is not None and t < times[i]:
                sizes[i] = d
                break
        else:
            return sizes


def leak_pj_per_core_cycle(cfg) -> float:
    """One core's leakage energy per cycle (pJ) by the power model."""
    from arch.counters import counter_names
    from sim.power import report_from_counters

    ctr = {n: 0 for n in counter_names(cfg)}
    ctr["cycles"] = 1_000_000
    return report_from_counters(cfg, ctr, n_cores=1).energy_pj["leakage"] / 1e6


def _feeder(job):
    """``next() -> (x, t)`` for the job's steps: its data set's training samples in a
    seeded order, or random inputs and classes (``data: random``)."""
    from sw.datasets import load_dataset

    mlp, b = job.mlp, job.mlp.batch
    rng = np.random.default_rng(job.seed)
    eye = np.eye(mlp.n_out)
    if job.data == "random":
        xs, ys = None, None
    else:
        d = load_dataset(job.data)
        if d.n_in != mlp.n_in or d.n_classes != mlp.n_out:
            raise InputError(f"job {job.name}: data {job.data} has {d.n_in} inputs and {d.n_classes} classes, the "
                             f"network {mlp.n_in} and {mlp.n_out}")
        xs, ys = d.x_train, d.y_train
    order, pos = [], 0

    def nxt():
        nonlocal order, pos
        if xs is None:
            x = rng.uniform(0, 1, (mlp.n_in, b)) if b > 1 else rng.uniform(0, 1, mlp.n_in)
            c = rng.integers(0, mlp.n_out, b)
        else:
            if pos + b > len(order):
                order, pos = rng.permutation(len(xs)), 0
            idx = order[pos:pos + b]
            pos += b
            x, c = (xs[idx].T if b > 1 else xs[idx[0]]), ys[idx]
        if b > 1:
            return x, (c if mlp.loss == "softmax_ce" else eye[c.astype(np.int64)].T)
        return x, (int(c[0]) if mlp.loss == "softmax_ce" else eye[int(c[0])])
    return nxt


def job_steps(job) -> int:
    if job.steps is not None:
        return job.steps
    from sw.datasets import load_dataset

    return job.epochs * (len(load_dataset(job.data).x_train) // job.mlp.batch)


def _run_job(cfg, job, sess, steps, progress=None) -> dict:
    """``steps`` steps of ``job`` in its group ``sess``: its counters (summed over its
    cores and steps), its time in cycles and its last step's cycles."""
    from sim.step_measure import compile_method
    from sw.train import init_weights

    sub = sess.cfg
    tp = compile_method(job.method, sub, job.mlp)
    tp.init(sess, init_weights(job.mlp, sub.fmt, job.seed))
    feed = _feeder(job)
    lat = tp.latency_steps() if job.method == "cp" else 0
    targets = []
    ctr: dict = {}
    total = last = 0
    for s in range(steps):
        x, t = feed()
        targets.append(t)
        r = tp.run_step(sess, x, targets[s - lat] if s >= lat else None) if job.method == "cp" \
            else tp.run_step(sess, x, t)
        last = int(r.cycles + r.host_cycles)
        total += last
        for c in r.core_counters:
            for k, v in c.items():
                ctr[k] = ctr.get(k, 0) + int(v)
        if progress is not None:
            progress()
    ctr["cycles"] = total
    return {"counters": ctr, "cycles": total, "step_cycles": last, "tp": tp}


def run_shared(cfg, jobs, sizes, part: Partition, steps, progress=None) -> list[dict]:
    """Run every job in its group of one :class:`sim.sessions.SharedChip` (fast engine);
    per job its record, or ``{"error": ...}`` for a job whose program failed."""
    from sim.sessions import SharedChip

    chip = SharedChip(cfg, part, "fast")
    out = []
    for g, job in enumerate(jobs):
        try:
            out.append(_run_job(cfg, job, chip.group(g), steps[g], progress))
        except InputError:
            raise
        except Exception as e:               # noqa: BLE001 - a faulty job is stopped, the others run
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


def share(cfg, jobs, *, slowdown: float = 1.5, progress=None, log=print) -> dict:
    """Profile, right-size, pack and run ``jobs`` on ``cfg``; the report (JSON-ready) with
    each job's step, slowdown, samples and energy, the aggregate figures, and time
    sharing's. ``progress(done, total)``: after every step of the concurrent run."""
    from sim.power import partition_energy

    t0 = time.perf_counter()
    n = cfg.cores
    if n < 2:
        raise InputError("sharing needs a chip configuration (cores >= 2)")
    profs = []
    for job in jobs:
        sizes = _sizes(n) if job.cores is None else sorted({job.cores, *_sizes(n)})
        profs.append(profile_job(cfg, job, sizes))
        log(f"profiled {job.describe()}: " + ", ".join(
            f"{k} cores {c[0]}" if c else f"{k} cores -" for k, c in sorted(profs[-1].steps.items())))
    want = [right_size(j, p, slowdown) for j, p in zip(jobs, profs)]

    steps = [job_steps(j) for j in jobs]

    def run_time(i, k):
        c = profs[i].cycles(k)
        return None if c is None else steps[i] * c

    def shrink(sizes):
        """The group whose halving leaves the smallest makespan (then: grows its job's run least)."""
        best = None
        for i, j in enumerate(jobs):
            h = sizes[i] // 2
            t = run_time(i, h) if j.cores is None and h >= 2 else None
            if t is not None:
                span = max([t] + [run_time(x, sizes[x]) for x in range(len(jobs)) if x != i])
                key = (span, t - run_time(i, sizes[i]))
                if best is None or key < best[0]:
                    best = (key, i)
        return None if best is None else best[1]

    granted, _ = pack(n, want, shrink)
    granted, part = pack(n, grow(n, granted, jobs, run_time))
    log("groups: " + ", ".join(f"{j.name} cores {a}..{a + k - 1}" for j, (a, k) in zip(jobs, part.groups)))
    done = [0]

    def tick():
        done[0] += 1
        if progress is not None:
            progress(done[0], sum(steps))
    runs = run_shared(cfg, jobs, granted, part, steps, tick)
    mhz = cfg.clock_mhz
    leak = leak_pj_per_core_cycle(cfg)
    rows = []
    for job, p, k, (a, _), st, r in zip(jobs, profs, granted, part.groups, steps, runs):
        kx, cx = p.exclusive()
        ex_energy = p.steps[kx][1] + leak * (n - kx) * cx      # the whole chip leaks in time sharing
        row = {"job": job.name, "network": list(job.mlp.sizes), "method": job.method, "batch": job.mlp.batch,
               "steps": st, "cores": k, "first_core": a, "requested_cores": job.cores,
               "exclusive_cores": kx, "exclusive_step_cycles": cx, "exclusive_step_energy_pj": ex_energy,
               "profile_step_cycles": {str(kk): (c[0] if c else None) for kk, c in sorted(p.steps.items())},
               "flops_per_step": p.steps[kx][2]}
        if "error" in r:
            row.update(error=r["error"])
        else:
            row.update(step_cycles=r["step_cycles"], cycles=r["cycles"], slowdown=r["step_cycles"] / cx,
                       samples=st * job.mlp.batch, seconds=r["cycles"] / (mhz * 1e6), error=None,
                       _energy=(r["counters"], k, p.steps[kx][2] * st))
        rows.append(row)
    ok = [r for r in rows if r["error"] is None]
    makespan = max((r["cycles"] for r in ok), default=0)
    pe = partition_energy(cfg, [r.pop("_energy") for r in ok], makespan)
    for r, rep in zip(ok, pe["jobs"]):
        r.update(energy_pj=float(sum(rep.energy_pj.values())), gflops_per_w=rep.gflops_per_w_all)
    idle = pe["idle_leakage_pj"]
    samples = sum(r["samples"] for r in ok)
    flops = pe["flops"]
    e_sh = pe["total_pj"]
    ts_cycles = sum(r["exclusive_step_cycles"] * r["steps"] for r in ok)
    ts_energy = sum(r["exclusive_step_energy_pj"] * r["steps"] for r in ok)
    agg = lambda cyc: samples / (cyc / (mhz * 1e6)) if cyc else 0.0   # noqa: E731
    # normalized progress (system throughput): each job's exclusive over shared step,
    # summed; time sharing's is 1 (one job's worth of progress per unit of time)
    stp = sum(r["exclusive_step_cycles"] / r["step_cycles"] for r in ok)
    return {
        "config": cfg.to_dict(), "slowdown_limit": slowdown, "partition": [list(g) for g in part.groups],
        "jobs": rows,
        "shared": {"cycles": makespan, "samples_per_s": agg(makespan), "gflops_per_w": flops / e_sh * 1e3 if e_sh else 0,
                   "energy_pj": e_sh, "idle_leakage_pj": idle},
        "time_sharing": {"cycles": ts_cycles, "samples_per_s": agg(ts_cycles),
                         "gflops_per_w": flops / ts_energy * 1e3 if ts_energy else 0, "energy_pj": ts_energy},
        "throughput_ratio": (ts_cycles / makespan) if makespan else 0.0,
        "normalized_progress": stp,
        "failed": [r["job"] for r in rows if r["error"] is not None],
        "wall_s": round(time.perf_counter() - t0, 1),
    }
