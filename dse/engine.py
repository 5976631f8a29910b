"""Where the evaluations run, and the cache that makes a search resumable.

- :class:`LocalEngine`: in this process, one point after another (tests, tiny spaces).
- :class:`RayEngine`: tasks on a Ray cluster: by default a local one started with
  ``workers`` worker processes; ``address`` joins an existing cluster. A task whose
  worker dies is retried by Ray (``max_retries``); a point that still fails is recorded
  with its reason, never lost.
- :class:`Evaluator`: the search's view: it returns cached results, sends the rest to
  the engine, appends every result to a JSON-lines cache as it arrives (flushed and
  synced), and counts the evaluations it ran. A rerun with the same cache evaluates
  nothing twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from arch.errors import ToolError, UsageError
from dse.evaluate import evaluate_point
from dse.space import Space, point_key

__all__ = ["LocalEngine", "RayEngine", "Evaluator", "check_reachable", "make_engine"]


class LocalEngine:
    """Evaluate in this process, in order."""

    name = "local"

    def __init__(self, fn=evaluate_point):
        self.fn = fn

    def run(self, tasks):
        """Yield ``(key, result)`` for ``tasks`` (``(key, args)`` pairs) as they finish."""
        for key, args in tasks:
            yield key, self.fn(*args)

    def close(self) -> None:
        pass


class RayEngine:
    """Evaluate as Ray tasks (retried when a worker dies), results as they complete.

    ``address``: an existing cluster (``ray://host:port`` or ``host:port``); None starts
    a local cluster with ``workers`` CPUs. ``in_flight``: the most tasks submitted at once."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int = 2, max_retries: int = 3, fn=evaluate_point,
                 in_flight: int | None = None):
        try:
            import ray
        except ImportError:
            raise ToolError("the distributed engine needs Ray: pip install 'ray>=2.40' (or use --engine local)") \
                from None
        if address:
            check_reachable(address)
        self.ray, self.address, self.workers, self.max_retries = ray, address, workers, max_retries
        self.fn, self.in_flight, self.started, self.remote, self.pending = fn, in_flight, False, None, 0

    def _start(self) -> None:
        """Join or start the cluster (on the first evaluation: a fully cached search needs none)."""
        ray = self.ray
        if not ray.is_initialized():
            root = str(Path(__file__).resolve().parent.parent)
            kw = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                      runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                          p for p in (root, os.environ.get("PYTHONPATH")) if p)}})
            try:
                if self.address:
                    ray.init(address=self.address, **kw)
                else:
                    ray.init(num_cpus=self.workers, **kw)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise ToolError(f"--address {self.address}: cannot join the Ray cluster ({first})" if self.address
                                else f"cannot start a local Ray cluster: {first}") from None
            self.started = True
        self.remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(self.fn)
        self.in_flight = self.in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", self.workers)))

    def run(self, tasks):
        ray = self.ray
        todo = list(tasks)
        if todo and self.remote is None:
            self._start()
        refs = {}
        while todo or refs:
            while todo and len(refs) < self.in_flight:
                key, args = todo.pop(0)
                refs[self.remote.remote(*args)] = key
            self.pending = len(refs) + len(todo)
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                key = refs.pop(ref)
                try:
                    res = ray.get(ref)
                except Exception as e:          # noqa: BLE001 - retries exhausted: record, do not lose
                    res = {"key": key, "status": f"error: the task failed after its retries ({type(e).__name__})"}
                yield key, res
        self.pending = 0

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast, in one line, when a cluster address does not answer (Ray itself retries
    for minutes). ``auto`` (the ``RAY_ADDRESS`` of a node of the cluster) is not checked."""
    import socket

    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"--address {address!r}: expected host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ToolError(f"--address {address}: no Ray cluster answers there ({e.strerror or e})") from None


def make_engine(name: str, address: str | None = None, workers: int = 2):
    if name == "local":
        if address:
            raise UsageError("--address applies to --engine ray")
        return LocalEngine()
    if name == "ray":
        return RayEngine(address=address, workers=workers)
    raise UsageError(f"--engine {name!r}: local or ray")


class Evaluator:
    """Cached evaluation of points of ``space`` on ``workloads``.

    ``cache``: a JSON-lines file of results keyed by :func:`dse.space.point_key`, read at
    start (a truncated last line from a killed run is ignored) and appended to as results
    arrive. ``evaluations`` counts the points this evaluator sent to the engine, ``asked``
    the distinct points a search asked for, cached or not;
    ``on_result(result)`` is called for every new result (progress).

    ``area_limit`` (mm^2): a point whose area (the power model's, from the configuration
    alone: :func:`dse.evaluate.config_area`) exceeds it is not measured; its result says
    so (status ``over area``), is not cached (the cache does not depend on limits) and
    is not an evaluation. ``screened`` counts those points."""

    def __init__(self, space: Space, workloads, engine, cache: Path | str | None = None, golden: bool = False,
                 on_result=None, area_limit: float | None = None):
        self.space, self.workloads, self.engine, self.golden = space, list(workloads), engine, golden
        self.area_limit, self.screened = area_limit, 0
        self.cache_path = Path(cache) if cache else None
        self.results: dict[str, dict] = {}
        self.evaluations = 0
        self.asked: set[str] = set()          #: distinct points asked for (cached or not)
        self.on_result = on_result
        if self.cache_path and self.cache_path.exists():
            for line in self.cache_path.read_text(encoding="utf-8").splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(r, dict) and "key" in r and not str(r.get("status", "")).startswith("error"):
                    self.results[r["key"]] = r
        self.cached_at_start = len(self.results)

    def key(self, point: dict) -> str:
        return point_key(self.space, point, self.workloads)

    def _store(self, res: dict) -> None:
        if self.cache_path is None:
            return
        with open(self.cache_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(res, default=float) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def evaluate(self, points) -> list[dict]:
        """The results of ``points`` (in order), evaluating the ones not cached."""
        keys = [self.key(p) for p in points]
        for k, p in zip(keys, points):
            if k not in self.asked and k in self.results:     # cached, maybe by a search over another space
                self.results[k] = {**self.results[k], "point": dict(p)}
        self.asked.update(keys)
        base = self.space.base.to_dict()
        todo, seen = [], set()
        for k, p in zip(keys, points):
            if k not in self.results and k not in seen:
                seen.add(k)
                over = self.over_area(p)
                if over is not None:
                    self.results[k] = {"key": k, "point": dict(p), "status": over}
                    self.screened += 1
                    continue
                todo.append((k, (base, p, self.workloads, k, self.golden)))
        for k, res in self.engine.run(todo):
            res.setdefault("point", next(p for kk, p in zip(keys, points) if kk == k))
            self.results[k] = res
            self.evaluations += 1
            self._store(res)
            if self.on_result:
                self.on_result(res)
        return [self.results[k] for k in keys]

    @property
    def spent(self) -> int:
        """The distinct points asked for that were measured, now or in the cache (not
        the ones over :attr:`area_limit`): what a search's budget counts."""
        return sum(1 for k in self.asked if not str(self.results.get(k, {}).get("status", "")).startswith("over area"))

    def over_area(self, point: dict) -> str | None:
        """The reason a point is over :attr:`area_limit` (None: within it, or not
        decidable here, e.g. an invalid configuration, left to the engine to record)."""
        if self.area_limit is None:
            return None
        from arch.config import ConfigError
        from dse.evaluate import config_area
        from dse.space import point_config

        try:
            area = config_area(point_config(self.space, point))
        except (ConfigError, TypeError):
            return None
        if area <= self.area_limit:
            return None
        return f"over area: {area:.1f} > {self.area_limit:g} mm^2 (area model; not measured)"

    def asked_results(self) -> list[dict]:
        """The results of the points asked for (the cache may hold other spaces' and
        workloads' points too)."""
        return [self.results[k] for k in self.asked if k in self.results]

    def known(self, point: dict) -> dict | None:
        return self.results.get(self.key(point))
