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

import contextlib
import functools
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

from ..errors import ClusterError
from .options import FinetuneOptions
from .run.distributed import World
from .run.lock import remove_abandoned_lock
from .tasks import task_named

CPUS_PER_TRIAL = 1  # Ray's CPUs per trial, and the trial's torch threads
PROBE_SECONDS = 5.0  # how long an address may take to accept a connection (ray.init itself retries for minutes)
LOCK_RELEASE_SECONDS = 10.0  # how long a killed trial's worker may take to die (and so release its run folder's lock)
TUNE_LOGGERS = ("ray.tune", "ray.air", "ray.train")  # the loggers of Tune and of the libraries it runs on
STOPS_TUNE = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1") if hasattr(signal, name)]


def run_on_ray(options: FinetuneOptions, plan: list[tuple[Path, float, int]], metric: str, address: str,
               done: list[dict], run_trial) -> None:  # fmt: skip
    """Run every (run folder, rate, seed) of ``plan`` as a Ray Tune trial, each ``run_trial`` (sweep.py's,
    passed in: this module imports nothing of the sweep); ``done`` gets their results in the plan's
    order. ``address``: "" for a local Ray, else the cluster's."""
    ray, tune = import_ray()
    from ray.tune.logger import JsonLoggerCallback

    # a bad file or flag: its one line now, not once per trial inside Tune's tracebacks
    task_named(options.task).prepare(options, World())
    with _handlers_kept() as handlers:  # Ray's and Tune's signal handlers never outlive the sweep
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
            stops = _stops_tune(tune, handlers, graceful=not started)
            with tempfile.TemporaryDirectory(prefix="minibert-tune-") as records, _tune_quiet(), stops.handing_on():
                run_config = tune.RunConfig(storage_path=records, name="sweep", verbose=0,
                                            callbacks=[JsonLoggerCallback(), stops],
                                            failure_config=tune.FailureConfig(fail_fast=True))  # fmt: skip
                tune_config = tune.TuneConfig(trial_name_creator=_named, trial_dirname_creator=_named,
                                              reuse_actors=True)  # a worker imports torch once, not per trial
                results = tune.Tuner(trainable, param_space={"trial": tune.grid_search(specs)},
                                     tune_config=tune_config, run_config=run_config).fit()  # fmt: skip
                results = [(result.error, (result.metrics or {}).get("trial")) for result in results]
            finished = {trial["run"]: trial for error, trial in results if error is None and trial is not None}
            done.extend(finished[run.name] for run, _, _ in plan if run.name in finished)
            for (error, _), spec in zip(results, specs):  # a trial that failed (not diverged: that is a result)
                if error is not None:
                    raise _trial_error(ray, error, Path(spec["run"]).name)
            if len(done) < len(plan):  # Tune stopped early (Ctrl-C): the driver says what is done
                raise KeyboardInterrupt
        finally:
            if started:
                ray.shutdown()
            for run, _, _ in plan:  # the trials Ray killed (stopped, failed fast) left their locks
                remove_abandoned_lock(run, wait=LOCK_RELEASE_SECONDS)


def _trial_error(ray, error: BaseException, name: str) -> BaseException:
    """A failed trial's error, as the sequential sweep would raise it: the exception the trial raised
    (Ray hands it over as a RayTaskError whose ``cause`` it is); a trial whose Ray worker process died
    (``ActorDiedError``, ``WorkerCrashedError``; ``OutOfMemoryError`` when Ray's memory monitor killed
    it; a lost node), ClusterError in one line, marked ``trial_lost``: the sweep adds the command that
    continues it (not the trial's fault: run again, it goes on)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, ray.exceptions.RayError):
        return cause
    if not isinstance(error, ray.exceptions.RayError):
        return error
    if isinstance(error, ray.exceptions.OutOfMemoryError):
        why = "Ray's memory monitor killed it: its node ran out of memory"
    else:
        why = "killed or crashed: most often the kernel's OOM killer, for want of memory, or its node was lost"
    lost = ClusterError(f"--ray: trial {name}: its Ray worker process died ({type(error).__name__}; {why})")
    lost.trial_lost = True
    return lost


@contextlib.contextmanager
def _handlers_kept():
    """Yields the signal handlers this process set in Python (the ``minibert`` command's stop handlers:
    a one-line message, the command that continues the sweep, exit 128 + the signal), and puts them
    back as the block ends. ``ray.init`` replaces SIGTERM's with its own (``sys.exit``; and its core
    worker with a handler that prints a crash dump and then sets an alarm), and Tune's ``fit()``
    SIGINT's and SIGUSR1's, and keeps them after it returns. Signals whose handler is not Python's
    (the default, or C code's) are left to those who set them."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():  # (only the main thread may set them)
        for signum in signal.valid_signals():
            handler = signal.getsignal(signum)
            if callable(handler) or handler == signal.SIG_IGN:
                handlers[signum] = handler
    try:
        yield handlers
    finally:
        _restore(handlers)


def _restore(handlers: dict) -> None:
    for signum, handler in handlers.items():
        if signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


def _stops_tune(tune, handlers: dict, graceful: bool):
    """A Tune callback that, as ``fit()`` starts (after Tune has set its SIGINT and SIGUSR1 handlers),
    puts the process's handlers back, each run through ``_received`` until ``handing_on()`` ends:

    - Ray's waits (C code) pass on KeyboardInterrupt alone: another exception a handler raises there
      (the command's stop on SIGTERM) became ``SystemError: CoreWorker.wait returned a result with an
      exception set``. A handler's exception is kept and KeyboardInterrupt raised in its place, and
      ``handing_on()`` raises it again once ``fit()`` has unwound.
    - Where this process started the Ray (``graceful`` False), that is all: ``ray.shutdown()`` ends
      the trials in a second or two (Tune's own stop waits up to 10 s for each trial's thread, which
      no trial ends early, before it kills its worker: past ``docker stop``'s grace). On a Ray it did
      not start (a notebook's), nothing else would release Tune's actors: there the first SIGINT,
      SIGTERM or SIGUSR1 stops Tune as its own handler does, and its handler runs once ``fit()`` has
      returned; a second signal runs it at once."""

    class StopsTune(tune.Callback):
        def __init__(self):
            self.handlers, self.graceful = handlers, graceful
            self.stop_tune = self.pending = self.raised = None

        def __getstate__(self) -> dict:  # (Tune pickles its callbacks, to restore a run this one never is)
            return {"handlers": {}, "graceful": False, "stop_tune": None, "pending": None, "raised": None}

        def setup(self, **info) -> None:
            tunes = signal.getsignal(signal.SIGUSR1)  # Tune's (SIGINT's is off with TUNE_DISABLE_SIGINT_HANDLER)
            if self.graceful and callable(tunes) and tunes is not self.handlers.get(signal.SIGUSR1):
                self.stop_tune = tunes
            for signum, handler in self.handlers.items():  # (none where not the main thread: none can be set there)
                signal.signal(signum, functools.partial(self._received, handler) if callable(handler) else handler)

        def _received(self, handler, signum: int, frame) -> None:
            if self.stop_tune is not None and self.pending is None and signum in STOPS_TUNE:
                self.pending = signum
                self.stop_tune(signum, frame)
                return
            try:
                handler(signum, frame)
            except KeyboardInterrupt:
                raise
            except BaseException as error:
                self.raised = error
                raise KeyboardInterrupt from None

        @contextlib.contextmanager
        def handing_on(self):
            """The block that runs ``fit()``: a handler's exception raised in its own name as it ends,
            a signal that stopped Tune handed to its handler; the process's handlers put back."""
            try:
                yield
            except BaseException:
                _restore(self.handlers)
                if self.raised is not None:
                    raise self.raised from None
                raise
            _restore(self.handlers)
            if self.pending is not None:
                self.handlers[self.pending](self.pending, None)

    return StopsTune()


@contextlib.contextmanager
def _tune_quiet():
    """Tune's own log lines off while it runs, and put back after: a trial's failure logged with its
    traceback ("Trial task failed", "Trials did not complete"), a stop's advice to resume with
    ``Tuner.restore`` from a folder this module deletes. The driver says what happened in minibert's
    one line (the trial's own error; or how many trials finished and the command that continues)."""
    loggers = [logging.getLogger(name) for name in TUNE_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


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
    """``ray.init(**settings)``, the process's signal handlers kept (Ray's replace them); what Ray
    refuses is one ClusterError line: ``source``: ``failed``: why."""
    try:
        with _handlers_kept():
            ray.init(**settings, log_to_driver=True, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        raise ClusterError(f"{source}: {failed}: {_said_for_minibert(error)}") from None


def _said_for_minibert(error: Exception) -> str:
    """Ray's refusal in one line, its advice for Ray's own command line (``--address``, a flag
    ``minibert finetune`` does not have) replaced by the flag that gives a cluster here."""
    said = " ".join(str(error).split()) or type(error).__name__
    kept = [sentence for sentence in said.split(". ") if "--address" not in sentence]
    if len(kept) == len(said.split(". ")):
        return said
    return ". ".join(kept).rstrip(".") + ": start one (`ray start --head`), or give its address: --ray HOST:6379"


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
