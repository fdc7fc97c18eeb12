"""The sweep's trials as Ray Tune trials (``minibert finetune ... --seeds 5 --learning-rates ... --ray``).

sweep.py runs every (learning rate, seed) trial one after another; with ``--ray`` each trial is one
Ray Tune trial instead, so a machine runs as many at once as it has CPUs and a cluster as many as
all its nodes have::

    minibert finetune ... --output sweep --seeds 5 --learning-rates 2e-5,3e-5,5e-5 --ray
    minibert finetune ... --output /shared/sweep --seeds 5 --learning-rates 2e-5,3e-5,5e-5 --ray head:6379

A trial runs sweep.py's ``run_trial`` (the same fine-tuning, the same run folder
``SWEEP/lr2e-05-seed12345``, "diverged" when it diverged, a resumed sweep continuing it), and the
driver (this process) holds the sweep folder's lock and writes ``sweep.json`` and ``sweep.md`` as
the sequential sweep does. Tune's own records go to a temporary folder, removed at the end.

- **Where.** ``--ray``: a local Ray started for the sweep with this machine's CPUs, shut down after
  (where ``$RAY_ADDRESS`` is set, as ``ray job submit`` sets it, the cluster it names).
  ``--ray ADDRESS`` (``host:6379``, ``ray://host:10001``, ``auto``): the cluster there; every node
  must have minibert installed and see ``--model``, ``--train``, ``--dev`` and ``--output`` at the
  same paths (a shared filesystem). A process already connected to a Ray (``ray.init`` in a
  notebook) uses that one.
- **Threads.** Each trial asks Ray for 1 CPU and sets torch to 1 thread, so N CPUs run N trials at
  once (a choice, not a measurement: independent trials never wait on each other, where one trial's
  threads meet at every operation). The thread count decides how sums are rounded
  (training/run/arithmetic.py), so a trial's figures equal those of the sequential sweep run with 1
  thread (``OMP_NUM_THREADS=1``) and the same GEMM backend, bit for bit
  (tests/test_training_finetune_ray.py); at other thread counts they differ in the last bits of the
  weights, which can move a dev figure. (The backend: ``auto`` picks it per machine, by a cached
  measurement; ``MINIBERT_GEMM`` in the environment Ray starts with names one for every worker.)

Ray is an optional extra (``pip install 'minibert[ray]'``), imported by this module only, and only
when a ``--ray`` sweep starts.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

from ..errors import ClusterError
from .options import FinetuneOptions
from .run.distributed import World
from .tasks import task_named

CPUS_PER_TRIAL = 1  # Ray's CPUs per trial, and the trial's torch threads
PROBE_SECONDS = 5.0  # how long an address may take to accept a connection (ray.init itself retries for minutes)


def run_on_ray(options: FinetuneOptions, plan: list[tuple[Path, float, int]], metric: str, address: str,
               done: list[dict], run_trial) -> None:  # fmt: skip
    """Run every (run folder, rate, seed) of ``plan`` as a Ray Tune trial, each ``run_trial`` (sweep.py's,
    passed in: this module imports nothing of the sweep); ``done`` gets their results in the plan's
    order. ``address``: "" for a local Ray, else the cluster's."""
    ray, tune = import_ray()
    from ray.tune.logger import JsonLoggerCallback

    # a bad file or flag: its one line now, not once per trial inside Tune's tracebacks
    task_named(options.task).prepare(options, World())
    started = connect(ray, address)
    try:
        options = with_absolute_paths(options)
        specs = [{"learning_rate": rate, "seed": seed, "run": str(run.resolve())} for run, rate, seed in plan]
        trainable = tune.with_parameters(_trial, options=options, metric=metric, run_trial=run_trial)
        trainable = tune.with_resources(trainable, {"cpu": CPUS_PER_TRIAL})
        # Tune's boxes go to stdout (the table's place) unless its older, silent reporter is chosen;
        # of its loggers, the JSON one alone (the results read back; TensorBoard's warns without tensorboardX)
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        with tempfile.TemporaryDirectory(prefix="minibert-tune-") as records:
            run_config = tune.RunConfig(storage_path=records, name="sweep", verbose=0, callbacks=[JsonLoggerCallback()],
                                        failure_config=tune.FailureConfig(fail_fast=True))  # fmt: skip
            tune_config = tune.TuneConfig(trial_name_creator=_named, trial_dirname_creator=_named,
                                          reuse_actors=True)  # a worker imports torch once, not per trial
            results = tune.Tuner(trainable, param_space={"trial": tune.grid_search(specs)}, tune_config=tune_config,
                                 run_config=run_config).fit()  # fmt: skip
        finished = {result.metrics["trial"]["run"]: result.metrics["trial"] for result in results
                    if result.error is None and "trial" in (result.metrics or {})}  # fmt: skip
        done.extend(finished[run.name] for run, _, _ in plan if run.name in finished)
        for result in results:  # a trial that failed (not diverged: that is a result): its error, as sequential
            if result.error is not None:
                raise getattr(result.error, "cause", None) or result.error
        if len(done) < len(plan):  # Tune stopped early (Ctrl-C): the driver says what is done
            raise KeyboardInterrupt
    finally:
        if started:
            ray.shutdown()


def _named(trial) -> str:
    return Path(trial.config["trial"]["run"]).name


def _trial(config: dict, options: FinetuneOptions, metric: str, run_trial) -> None:
    """One trial, in a Ray worker: the sequential sweep's run_trial at CPUS_PER_TRIAL threads."""
    import torch
    from ray import tune

    torch.set_num_threads(CPUS_PER_TRIAL)
    spec = config["trial"]
    tune.report({"trial": run_trial(options, Path(spec["run"]), spec["learning_rate"], spec["seed"], metric)})


def import_ray():
    """(ray, ray.tune), or ClusterError with the pip command when the ray extra is missing."""
    try:
        import ray
        from ray import tune
    except ImportError as error:
        raise ClusterError(f"--ray needs the ray extra ({error.name or 'ray'} is not installed): "
                           "pip install 'minibert[ray]'") from None  # fmt: skip
    return ray, tune


def connect(ray, address: str) -> bool:
    """Connect this process to Ray: the one it is already connected to, the cluster at ``address``
    (or, ``address`` "", at ``$RAY_ADDRESS``: ``ray job submit`` sets it for its entrypoint), or a
    new local one with this machine's CPUs. Says which on stderr; returns whether it started the
    connection (and so shuts it down after). Ray's refusals are ClusterError naming the address and
    where it came from (``ray.init`` itself reads ``$RAY_ADDRESS`` and then refused the local
    start's ``num_cpus``, naming neither)."""
    source = f"--ray {address}"
    if not address and os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
        source = f"RAY_ADDRESS={address} (--ray without an address uses it)"
    if address:
        probe(address, source)
    started = not ray.is_initialized()
    if not started:
        where = "the Ray this process is connected to"
    elif address:  # a cluster sets its own CPUs: num_cpus is refused there
        _init(ray, source, "cannot connect to a Ray cluster there", address=address)
        where = f"the Ray cluster at {address}" + (" ($RAY_ADDRESS)" if source.startswith("RAY_ADDRESS") else "")
    else:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        _init(ray, "--ray", "cannot start a local Ray", address="local", num_cpus=cpus, include_dashboard=False)
        where = "a local Ray started for the sweep"
    print(f"minibert: sweep: on {where} ({_cpus(ray)} CPUs), {CPUS_PER_TRIAL} CPU and torch thread per trial",
          file=sys.stderr)  # fmt: skip
    return started


def _init(ray, source: str, failed: str, **settings) -> None:
    """``ray.init(**settings)``; what Ray refuses is one ClusterError line: ``source``: ``failed``: why."""
    try:
        ray.init(**settings, log_to_driver=True, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        raise ClusterError(f"{source}: {failed}: {' '.join(str(error).split()) or type(error).__name__}") from None


def probe(address: str, source: str) -> None:
    """A ``host:port`` (or ``ray://host:port``) that accepts no connection within PROBE_SECONDS:
    ClusterError naming it as ``source`` gave it (``ray.init`` would retry for minutes). "auto" and
    the like pass."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ClusterError(f"{source}: no Ray cluster answers there ({reason})") from None


def with_absolute_paths(options: FinetuneOptions) -> FinetuneOptions:
    """The options with every local file or folder made absolute (a trial runs in Tune's folder)."""
    import dataclasses

    changes = {name: str(Path(value).resolve()) for name in ("model", "train", "dev")
               if isinstance(value := getattr(options, name), str) and Path(value).exists()}  # fmt: skip
    return dataclasses.replace(options, **changes)


def _cpus(ray) -> int:
    return int(ray.cluster_resources().get("CPU", 0))
