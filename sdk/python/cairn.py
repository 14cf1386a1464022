"""cairn trial SDK: the Python side of the control protocol (docs/protocol.md).

A training script calls ``cairn.init()`` and gets a Context that knows the trial's
hyperparameters and seed, hands out operations ("train until N units are completed"),
carries metrics and checkpoints to the cairn process that supervises the trial, and
tells the script when to stop. Outside cairn (no CAIRN_CONTROL) the same script runs
standalone. See docs/sdk.md for the user guide.

Standard library only: cairn writes this file out and puts it on PYTHONPATH.
"""

import atexit
import collections
import contextlib
import json
import math
import os
import pathlib
import pickle
import random
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

__all__ = ["init", "Context", "Operation", "PROTOCOL_VERSION"]
__version__ = "0.1.0"

PROTOCOL_VERSION = 1

# A training batch is sent when it holds this many reports or bytes, or when its first
# report has waited this long: large enough to amortise the syscall, small enough that
# `cairn watch` looks live.
_BATCH_REPORTS = 1000
_BATCH_BYTES = 64 * 1024
_BATCH_SECONDS = 0.2
_HANDSHAKE_SECONDS = 60.0
_ORPHAN_MARKER = "cairn_orphan.json"
# In an orphan checkpoint (rank 0): the training and validation reports cairn may not
# have stored, one {"step":S,"metrics":{...}} per line.
_ORPHAN_TRAINING = "cairn_orphan_metrics.jsonl"
_ORPHAN_VALIDATIONS = "cairn_orphan_validations.jsonl"
# barrier() N is a sync at this step + N: above every training step (see barrier()).
_BARRIER_BASE = 1 << 50
# Unacknowledged training reports kept beyond this: the oldest are dropped.
_UNACKED_REPORTS = 1000000
# Only the process that called init() talks to cairn (one connection per rank). init()
# records "PID CAIRN_CONTROL" here, so that a process started from it with its
# environment (multiprocessing "spawn" workers, a subprocess) knows it is a child and
# does not open a second connection as the same rank, which cairn would refuse (and the
# child would exit with that error). Forked children are told by _after_fork_in_child.
_OWNER_VARIABLE = "CAIRN_SDK_OWNER"

_context = None  # init() is idempotent: one control connection per process


def init():
    """Connects to cairn (or goes standalone) and returns the trial's Context.

    Seeds ``random``, NumPy and torch from the trial's seed; NumPy and torch are seeded
    when the script imports them, so a script that never uses torch does not pay for
    importing it. Exits the process with status 1 and a one-line message when the
    control channel named by CAIRN_CONTROL cannot be reached.
    """
    global _context
    if _context is None:
        _context = Context._from_environment()
    return _context


class Operation:
    """One unit of work from the searcher: train until ``length`` units are completed."""

    __slots__ = ("length",)

    def __init__(self, length):
        self.length = length

    def __repr__(self):
        return "Operation(length=%d)" % self.length


class Context:
    """The trial's view of cairn. Create it with ``cairn.init()``."""

    def __init__(self, settings, channel, owner_pid=None):
        self._settings = settings
        self._channel = channel
        # A child of the trial's process (see _OWNER_VARIABLE) may read the settings but
        # not talk to cairn: its calls raise instead of disturbing the trial's channel.
        self._owner_pid = owner_pid or os.getpid()
        self._child = owner_pid is not None
        self.hparams = settings["hparams"]
        self.seed = settings["seed"]
        self.trial_id = settings["trial_id"]
        self.experiment_id = settings["experiment_id"]
        self.steps_completed = settings["steps_completed"]
        self.latest_checkpoint = settings["latest_checkpoint"]
        self.rank = settings["rank"]
        self.world_size = settings["world_size"]
        self.deterministic = settings["deterministic"]
        self.checkpoint_period = settings["checkpoint_period"]
        self.latest_checkpoint_id = None  # cairn's id of the last checkpoint committed
        self._op_length = None
        self._rng_pending = self.latest_checkpoint is not None
        # Multi-rank: (step, generator state) from the last checkpoint_due() that was true,
        # until this rank enters checkpoint(step) or makes another call instead (then it is
        # not part of that checkpoint: see _leave_checkpoint).
        self._due = None
        self._signals = _StopSignals()
        # Rank 0: validation reports made once cairn was gone, kept for an orphan.
        self._undelivered_validations = []
        self._standalone = None  # ./checkpoints/, made at the first standalone checkpoint
        self._local_kv = {}  # kv_set/kv_get standalone
        self._barriers = 0  # barrier() calls so far

    @classmethod
    def _from_environment(cls):
        settings = _settings_from_environment()
        channel = None
        owner_pid = _owner_of(settings)
        if owner_pid is None:
            os.environ[_OWNER_VARIABLE] = "%d %s" % (os.getpid(), settings["control"])
        if settings["control"] and owner_pid is None:
            # cairn records only rank 0's metrics, so only rank 0 keeps them for an orphan.
            channel = _Channel.connect_or_exit(settings, agree_on_stop=settings["world_size"] > 1,
                                               keep_unacked=settings["rank"] == 0)
            # An older cairn sent these in `welcome` too, besides CAIRN_CHECKPOINT_PERIOD and
            # CAIRN_DETERMINISTIC: still understood (its values win, as they did).
            settings["checkpoint_period"] = channel.welcome.get(
                "checkpoint_period", settings["checkpoint_period"])
            settings["deterministic"] = bool(
                channel.welcome.get("deterministic", settings["deterministic"]))
        _seed_generators(settings["seed"], settings["deterministic"])
        _check_blas()  # NumPy or torch imported before init(); else when they are
        context = cls(settings, channel, owner_pid)
        context._signals.install(child=context._child)
        if not context._child:
            atexit.register(context._close)
        return context

    def _become_fork_child(self):
        """In a process forked from the trial's (a DataLoader worker, a multiprocessing
        "fork" worker): drop the inherited connection without a word to cairn. Flushing
        the inherited training buffer at the child's exit would send the parent's
        reports a second time, interleaved with the parent's own writes."""
        self._child = True
        self._signals.become_child()
        if self._channel is not None:
            self._channel.forget_in_child()

    def _refuse_in_child(self, call):
        raise RuntimeError("cairn: %s called in process %d, a child of the trial's process %d: "
                           "only the process that called cairn.init() talks to cairn" %
                           (call, os.getpid(), self._owner_pid))

    # -- work -----------------------------------------------------------------------

    def operations(self):
        """Yields the operations cairn has for this trial; ends when there is no more
        work or the trial must stop, after which the script should exit 0."""
        if self._child:
            self._refuse_in_child("operations()")
        try:
            while True:
                self._leave_checkpoint("operations")
                if self._stop_reason() is not None:
                    break
                length = self._next_operation_length()
                if length is None:
                    break
                self._op_length = length
                if self._rng_pending:
                    self._rng_pending = False
                    self._restore_rng()
                yield Operation(length)
        finally:
            if self._channel is not None:
                self._channel.flush()

    def _next_operation_length(self):
        if self._channel is None:
            if self._op_length is not None:
                return None
            return self._settings["max_length"]
        # A single-rank trial may give up waiting on Ctrl-C; ranks must stay together.
        interrupt = None if self._channel.agree_on_stop else self._signals.stop_requested
        answer = self._channel.request({"type": "next_operation"}, interrupt=interrupt)
        if answer is None or answer.get("type") != "operation" or answer.get("done"):
            return None
        return int(answer["length"])

    # -- metrics --------------------------------------------------------------------

    def report_training(self, step, metrics):
        """Records training metrics for ``step``. Buffered: cheap enough to call on
        every batch. NaN and infinities are recorded as null. Raises TypeError when a
        value is not a number (see _checked_metrics)."""
        if self._child:
            self._refuse_in_child("report_training()")
        metrics = _checked_metrics(metrics)
        if self._channel is None:
            _print_metrics("training", step, metrics)
            return
        if self._due is not None:
            self._leave_checkpoint("report_training")
        self._channel.add_training_report(step, metrics)

    def report_validation(self, step, metrics):
        """Records validation metrics for ``step`` (they must include the searcher's
        metric) and waits until cairn has stored them. Returns False when they could
        not be delivered. Raises TypeError when a value is not a number."""
        if self._child:
            self._refuse_in_child("report_validation()")
        metrics = _checked_metrics(metrics)
        if self._channel is None:
            _print_metrics("validation", step, metrics)
            return True
        metrics = _finite_metrics(metrics)
        self._leave_checkpoint("report_validation")
        answer = self._channel.request(
            {"type": "validation", "step": int(step), "metrics": metrics})
        if answer is None:
            if self.rank == 0:
                self._undelivered_validations.append(
                    '{"step":%d,"metrics":%s}' % (step, _metrics_encoder.encode(metrics)))
            _warn("validation metrics for step %d not delivered: cairn is gone (kept with an "
                  "orphan checkpoint)" % int(step))
            return False
        if answer.get("type") == "error":
            _warn("validation metrics for step %d rejected: %s" %
                  (int(step), answer.get("message", "")))
            return False
        return True

    # -- stopping -------------------------------------------------------------------

    def checkpoint_due(self, step):
        """True when ``step`` is a multiple of the checkpoint period, when it reaches
        the current operation's length (a searcher decision point), and when the trial
        has been asked to stop."""
        if self._child:
            self._refuse_in_child("checkpoint_due()")
        step = int(step)
        if self._channel is not None:
            if self._channel.agree_on_stop:
                self._leave_checkpoint("checkpoint_due")
                self._channel.sync(step, self._signals.stop_requested())
            else:
                self._channel.poll()
        due = self._stop_reason() is not None
        period = self.checkpoint_period
        if not due and step > 0 and period > 0 and step % period == 0:
            due = True
        if not due:
            due = self._op_length is not None and step >= self._op_length
        if due and self.world_size > 1 and self._channel is not None:
            # Captured now, where checkpoint(step) would capture it: a rank that does not
            # enter checkpoint(step) still resumes with the numbers it would have drawn.
            self._due = (step, _capture_rng())
        return due

    def should_preempt(self):
        """True when the trial must checkpoint and exit: paused, pre-empted, Ctrl-C,
        or cairn itself went away. In a multi-rank trial this is the stop decision
        all ranks agreed on at the last checkpoint_due()."""
        if self._child:
            self._refuse_in_child("should_preempt()")
        self._leave_checkpoint("should_preempt")
        if self._channel is not None and not self._channel.agree_on_stop:
            self._channel.poll()
        return self._stop_reason() is not None

    # -- ranks --------------------------------------------------------------------

    def kv_set(self, key, value):
        """Publishes the string ``value`` under ``key`` to every rank of this attempt of
        the trial (docs/protocol.md, "Rendezvous"); setting a key again replaces it. Keys
        up to 256 bytes, values up to 64 KiB of printable text, 4,096 keys per attempt.
        Standalone, the table is this process's own. Raises RuntimeError when cairn
        refuses or is gone."""
        if self._child:
            self._refuse_in_child("kv_set()")
        key, value = str(key), str(value)
        if self._channel is None:
            self._local_kv[key] = value
            return
        answer = self._channel.request({"type": "kv_set", "key": key, "value": value})
        if answer is None or answer.get("type") != "kv":
            raise RuntimeError("cairn: kv_set(%r) failed: %s" % (
                key, "cairn is gone" if answer is None else answer.get("message", "")))

    def kv_get(self, key, timeout=600.0):
        """The value some rank published under ``key``, waiting for it up to ``timeout``
        seconds (None: for ever). Raises TimeoutError when it did not come, RuntimeError
        when cairn refuses or is gone (standalone, KeyError when it was never set)."""
        if self._child:
            self._refuse_in_child("kv_get()")
        key = str(key)
        if self._channel is None:
            return self._local_kv[key]
        deadline = None if timeout is None else time.monotonic() + timeout
        expired = None if deadline is None else (lambda: time.monotonic() > deadline)
        answer = self._channel.request({"type": "kv_get", "key": key}, interrupt=expired)
        if answer is None and expired is not None and expired() and not self._channel.closed:
            raise TimeoutError("cairn: kv_get(%r): no rank set it within %g s" % (key, timeout))
        if answer is None or answer.get("type") != "kv" or "value" not in answer:
            raise RuntimeError("cairn: kv_get(%r) failed: %s" % (
                key, "cairn is gone" if answer is None else answer.get("message", "")))
        return answer["value"]

    def experiment_best_validation(self):
        """The best value of searcher.metric any trial of the experiment has validated so
        far (by searcher.smaller_is_better), or None when none has. Standalone, or with a
        cairn that does not know the request: None."""
        if self._child:
            self._refuse_in_child("experiment_best_validation()")
        if self._channel is None:
            return None
        answer = self._channel.request({"type": "best_validation"})
        if answer is None or answer.get("type") != "best_validation":
            return None
        return answer.get("value")

    def barrier(self):
        """Waits until every rank of the trial has called barrier() as many times as this
        one, and agrees with them on stopping: afterwards should_preempt() answers the same
        on every rank. A no-op with one rank (it only reads what cairn sent)."""
        if self._child:
            self._refuse_in_child("barrier()")
        if self._channel is None:
            return
        if not self._channel.agree_on_stop:
            self._channel.poll()
            return
        # Barriers are syncs at steps far above any training step, so that a rank waiting
        # in one has moved on from every checkpoint the other ranks may be saving without
        # it (docs/protocol.md: a rank alone may save a checkpoint).
        self._barriers += 1
        self._channel.sync(_BARRIER_BASE + self._barriers, self._signals.stop_requested())

    def _leave_checkpoint(self, call):
        """In a multi-rank trial, a rank that makes its next call for a due step without
        entering checkpoint(step) is not part of that checkpoint (rank 0 alone may save
        it). cairn is told, with this rank's generator state to keep with the checkpoint,
        and answers once the checkpoint is committed; cairn gone, the state and a marker
        go to the orphan checkpoint so that it is complete (docs/protocol.md)."""
        if self._due is None:
            return
        step, rng_state = self._due
        self._due = None
        channel = self._channel
        answer = None
        if not channel.closed and channel.knows_skip:
            data = pickle.dumps(rng_state, protocol=4)
            answer = channel.request({"type": "checkpoint_skip", "step": step, "call": call,
                                      "rng": {"name": _rng_file_name(self.rank),
                                              "hex": data.hex()}})
            if answer is not None and answer.get("type") == "error":
                channel.knows_skip = False  # an older cairn: ranks enter checkpoints together
        if answer is None and channel.closed:
            _OrphanCheckpoint.skip(self, step, rng_state)

    def _stop_reason(self):
        if self._channel is not None:
            reason = self._channel.stop_reason
            if reason is not None or self._channel.agree_on_stop:
                return reason
        return self._signals.stop_requested()

    # -- checkpoints ----------------------------------------------------------------

    def fetch_checkpoint(self, ref):
        """A copy of any stored checkpoint, of this experiment or another in the store:
        ``ref`` is its id (or a prefix of at least 4 hex digits), ``"7.3@latest"`` /
        ``"7.3@best"``, or the storage id the ``determined`` package gave it. Returns a
        dict: ``path`` (a pathlib.Path of a fresh directory on this machine holding the
        checkpoint's files, verified against their hashes), ``checkpoint`` (its id),
        ``trial``, ``experiment``, ``steps_completed`` and ``metadata``. Raises
        FileNotFoundError when the store has no usable checkpoint by that name, and
        RuntimeError standalone or when cairn is gone."""
        if self._child:
            self._refuse_in_child("fetch_checkpoint()")
        if self._channel is None:
            raise RuntimeError("cairn: fetch_checkpoint(%r): not running under cairn" % (ref,))
        answer = self._channel.request({"type": "checkpoint_fetch", "ref": str(ref)})
        if answer is None:
            raise RuntimeError("cairn: fetch_checkpoint(%r): cairn is gone" % (ref,))
        if answer.get("type") != "checkpoint_fetched":
            raise FileNotFoundError("cairn: checkpoint %r: %s" % (
                ref, answer.get("message", "cairn does not know checkpoint_fetch")))
        out = dict(answer)
        out.pop("type", None)
        out.pop("re", None)
        out["path"] = pathlib.Path(answer["path"])
        return out

    @contextlib.contextmanager
    def checkpoint(self, step, metadata=None):
        """Yields an empty directory (pathlib.Path) to write the checkpoint for
        ``step`` into. When the block ends normally the checkpoint is committed
        atomically, with the state of the random generators; when it raises, the
        partial checkpoint is discarded and the exception propagates."""
        if self._child:
            self._refuse_in_child("checkpoint()")
        step = int(step)
        if self._due is not None and self._due[0] != step:
            self._leave_checkpoint("checkpoint")
        self._due = None  # this rank takes part in the checkpoint of `step`
        rng_state = _capture_rng()
        target = self._checkpoint_target(step)
        try:
            yield target.path
        except BaseException:
            target.abort()
            raise
        _write_rng_file(target.path, self.rank, rng_state)
        checkpoint_id = target.commit(dict(metadata or {}))
        if checkpoint_id is not None:
            self.latest_checkpoint_id = checkpoint_id

    def _checkpoint_target(self, step):
        if self._channel is None:
            if self._standalone is None:
                self._standalone = _StandaloneCheckpoints(self._settings)
            return self._standalone.begin(step)
        answer = self._channel.request({"type": "checkpoint_begin", "step": step})
        if answer is not None and answer.get("type") == "checkpoint_dir":
            return _CairnCheckpoint(self, step, pathlib.Path(answer["path"]))
        if answer is not None:
            _warn("cairn refused a checkpoint at step %d: %s; it will not be kept" %
                  (step, answer.get("message", "")))
            return _DiscardedCheckpoint(step, None)
        return _orphan_or_discard(self, step)

    def _orphan_metrics(self, step):
        """What an orphan checkpoint at ``step`` carries for cairn to record: None for
        ranks other than 0 (cairn records only rank 0's metrics)."""
        if self.rank != 0:
            return None
        training, complete = self._channel.unacked_reports(step)
        validations = [r for r in self._undelivered_validations if _report_step(r) <= step]
        return _OrphanMetrics(training, validations, complete)

    def _restore_rng(self):
        path = self.latest_checkpoint / _rng_file_name(self.rank)
        try:
            with open(path, "rb") as f:
                state = pickle.load(f)
        except FileNotFoundError:
            _warn("%s has no %s; random generators not restored" %
                  (self.latest_checkpoint, path.name))
            return
        except Exception as e:  # a damaged file must not stop training
            _warn("cannot read %s (%s); random generators not restored" % (path, e))
            return
        _restore_rng_state(state)

    def _close(self):
        if self._channel is not None and not self._child:
            if self._due is not None and self._channel.closed:
                self._leave_checkpoint("exit")  # the orphan checkpoint needs its marker
            self._channel.close()


# -- settings -----------------------------------------------------------------------


def _settings_from_environment():
    env = os.environ
    latest = env.get("CAIRN_LATEST_CHECKPOINT", "")
    experiment = env.get("CAIRN_EXPERIMENT_ID", "")
    return {
        "control": env.get("CAIRN_CONTROL", ""),
        "hparams": _hparams_from_environment(),
        "seed": _env_int("CAIRN_SEED", 0),
        "trial_id": env.get("CAIRN_TRIAL_ID") or None,
        "attempt": _env_int("CAIRN_ATTEMPT", 0),
        "experiment_id": int(experiment) if experiment.isdigit() else (experiment or None),
        "steps_completed": _env_int("CAIRN_STEPS_COMPLETED", 0),
        "latest_checkpoint": pathlib.Path(latest).resolve() if latest else None,
        "rank": _env_int("RANK", 0),
        "world_size": max(1, _env_int("WORLD_SIZE", 1)),
        "deterministic": env.get("CAIRN_DETERMINISTIC", "0").strip().lower() in
        ("1", "true", "yes"),
        "checkpoint_period": _env_int("CAIRN_CHECKPOINT_PERIOD", 1),
        "max_length": _env_int("CAIRN_MAX_LENGTH", 1),
        "orphan_dir": env.get("CAIRN_ORPHAN_DIR") or None,
        "standalone_dir": pathlib.Path("checkpoints").resolve(),
        # Like checkpoint.keep_trial_latest's default: a standalone run at the default
        # period 1 must not fill the project with a checkpoint per step.
        "standalone_keep": _env_int("CAIRN_KEEP_LATEST", 1),
    }


def _owner_of(settings):
    """The pid of the trial's process when this one is its child (see _OWNER_VARIABLE)."""
    pid, _, control = os.environ.get(_OWNER_VARIABLE, "").partition(" ")
    if not pid.isdigit() or int(pid) == os.getpid() or control != settings["control"]:
        return None  # the trial's process (also after an exec), or another cairn's trial
    return int(pid)


def _after_fork_in_child():
    if _context is not None:
        _context._become_fork_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _hparams_from_environment():
    text = os.environ.get("CAIRN_HPARAMS", "").strip()
    if not text:
        return {}
    try:
        hparams = json.loads(text)
    except ValueError as e:
        _fail("CAIRN_HPARAMS is not valid JSON: %s" % e)
    if not isinstance(hparams, dict):
        _fail("CAIRN_HPARAMS must be a JSON object")
    return hparams


def _env_int(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        _warn("%s=%r is not an integer; using %d" % (name, text, default))
        return default


def _warn(message):
    sys.stderr.write("cairn: warning: %s\n" % message)
    sys.stderr.flush()


def _fail(message):
    sys.stderr.write("cairn: error: %s\n" % message)
    sys.stderr.flush()
    sys.exit(1)


# -- metrics encoding -----------------------------------------------------------------


def _checked_metrics(metrics):
    """``metrics`` with every value an int, a float or None, or TypeError naming the
    first metric that is not a number, the same with and without cairn. Python ints
    and floats (the common case) are checked cheaply and passed as they are; other
    numbers (NumPy scalars, 0-d torch tensors, Decimal) are converted with float().
    A str is refused even when it reads as a number, and so is a bool: neither is a
    measurement, and cairn would store or plot it as something else."""
    try:
        for value in metrics.values():
            cls = value.__class__
            if cls is not float and cls is not int:
                return {name: _metric_number(name, value) for name, value in metrics.items()}
    except AttributeError:
        raise TypeError("cairn: metrics must be a dict of names to numbers, got %s" %
                        type(metrics).__name__) from None
    return metrics


def _is_numpy_bool(value):
    # numpy.bool_ (named "bool" from NumPy 2 on), looked up only if numpy is already loaded.
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


def _metric_number(name, value):
    if value is None or value.__class__ is float or value.__class__ is int:
        return value
    cls = type(value)
    if (not isinstance(value, (str, bytes, bool)) and not _is_numpy_bool(value) and
            hasattr(cls, "__float__")):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError, RuntimeError) as e:
            raise TypeError("cairn: metric %r must be a number, got %s (%s)" %
                            (str(name), cls.__name__, e)) from None
    raise TypeError("cairn: metric %r must be a number, got %s %s" %
                    (str(name), cls.__name__, _short_repr(value)))


def _short_repr(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_metrics_encoder = json.JSONEncoder(separators=(",", ":"))


def _finite_metrics(metrics):
    """The (checked) metrics with every value a float, and NaN or infinities as None."""
    result = {}
    for name, value in metrics.items():
        number = float(value) if value is not None else math.nan
        result[str(name)] = number if math.isfinite(number) else None
    return result


def _encode_metrics(metrics):
    text = _metrics_encoder.encode(metrics)
    # json writes NaN/Infinity literals, which are not JSON; rare enough to redo slowly.
    if "NaN" in text or "Infinity" in text:
        text = _metrics_encoder.encode(_finite_metrics(metrics))
    return text


def _print_metrics(kind, step, metrics):
    values = " ".join("%s=%.6g" % (name, float(value)) if value is not None else
                      "%s=null" % name for name, value in metrics.items())
    sys.stderr.write("cairn: step %d %s: %s\n" % (int(step), kind, values))


# -- the control channel ----------------------------------------------------------------


class _Channel:
    """One connection to cairn: newline-delimited JSON in both directions.

    The script's threads send requests and read answers; a small daemon thread sends a
    training batch that has waited _BATCH_SECONDS. ``_lock`` covers the training buffer
    and every write to the socket, so lines never interleave and messages leave in the
    order the trial made its calls. ``_reading`` lets one thread at a time make a request
    and read the socket: a thread blocked in recv() for an answer another thread had
    already read would wait forever, and the inbox is not safe to parse from two threads.
    """

    def __init__(self, sock, agree_on_stop, keep_unacked):
        self._sock = sock
        # Ranks of one trial must stop at the same step, so their stop comes from the
        # answer to `sync`, never straight from a `stop` message.
        self.agree_on_stop = agree_on_stop
        self.knows_skip = True  # False once cairn answered checkpoint_skip with an error
        self._cairn_stop = None  # a `stop` waiting for the ranks to agree
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._batch = []
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._batch_waiting = threading.Event()
        # Training reports cairn has not acknowledged storing (rank 0), for an orphan.
        self._unacked = _UnackedReports(_UNACKED_REPORTS) if keep_unacked else None
        self._inbox = bytearray()
        self._answers = {}
        self._seq = 0
        self.closed = False
        self.stop_reason = None
        self.welcome = {}
        self._fatal_error = None
        threading.Thread(target=self._flush_when_old, name="cairn-flush", daemon=True).start()

    @classmethod
    def connect_or_exit(cls, settings, agree_on_stop, keep_unacked):
        address = settings["control"]
        try:
            sock = _connect(address)
        except (OSError, ValueError) as e:
            _fail("cannot reach cairn at CAIRN_CONTROL=%s: %s" % (address, _os_reason(e)))
        channel = cls(sock, agree_on_stop, keep_unacked)
        error = channel._handshake(settings)
        if error:
            channel.close()
            _fail(error)
        return channel

    def _handshake(self, settings):
        self.send({"type": "hello", "protocol": PROTOCOL_VERSION, "trial": settings["trial_id"],
                   "experiment": settings["experiment_id"], "rank": settings["rank"],
                   "world_size": settings["world_size"], "pid": os.getpid(),
                   "sdk": "python/" + __version__,
                   **({"attempt": settings["attempt"]} if settings.get("attempt") else {})})
        deadline = time.monotonic() + _HANDSHAKE_SECONDS
        while not self.welcome:
            if self.closed:
                return "cairn closed the control channel during the handshake"
            if self._fatal_error:
                return "cairn refused the trial: %s" % self._fatal_error
            left = deadline - time.monotonic()
            if left <= 0:
                return "cairn did not answer the handshake within %ds" % _HANDSHAKE_SECONDS
            self._receive(timeout=left)
        return None

    # -- sending --

    def send(self, message):
        """Sends one message after the training reports buffered before it; returns the
        mark of the unacknowledged reports kept so far (see _UnackedReports)."""
        line = json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n"
        with self._lock:
            self._write_locked(self._take_batch_locked())
            self._write_locked(line)
            return self._unacked.mark() if self._unacked is not None else 0

    def add_training_report(self, step, metrics):
        if self.closed and self._unacked is None:  # once cairn is gone, reports are kept
            return
        report = '{"step":%d,"metrics":%s}' % (step, _encode_metrics(metrics))
        with self._lock:
            self._batch.append(report)
            self._batch_bytes += len(report)
            if len(self._batch) == 1:
                self._batch_started = time.monotonic()
                self._batch_waiting.set()
            elif len(self._batch) >= _BATCH_REPORTS or self._batch_bytes >= _BATCH_BYTES:
                self._write_locked(self._take_batch_locked())

    def flush(self):
        with self._lock:
            self._write_locked(self._take_batch_locked())

    def _take_batch_locked(self):
        if not self._batch:
            return ""
        reports = ",".join(self._batch)
        if self._unacked is not None:
            self._unacked.add(reports, len(self._batch))
        self._batch = []
        self._batch_bytes = 0
        self._batch_waiting.clear()
        if self.closed:
            return ""
        return '{"type":"training","reports":[' + reports + "]}\n"

    def unacked_reports(self, max_step):
        """The training reports cairn has not acknowledged, with step <= max_step, as
        JSON text in the order they were made, and whether none were dropped."""
        with self._lock:
            if self._unacked is None:
                return [], True
            reports = self._unacked.reports(max_step)
            reports.extend(r for r in self._batch if _report_step(r) <= max_step)
            return reports, self._unacked.complete()

    def _write_locked(self, text):
        if not text or self.closed:
            return
        try:
            self._sock.sendall(text.encode())
        except OSError:
            self._on_closed()

    def _flush_when_old(self):
        while True:
            self._batch_waiting.wait()
            with self._lock:
                if not self._batch:
                    continue
                wait = self._batch_started + _BATCH_SECONDS - time.monotonic()
                if wait <= 0:
                    self._write_locked(self._take_batch_locked())
                    continue
            time.sleep(wait)

    # -- requests --

    def request(self, message, interrupt=None):
        """Sends a request and returns cairn's answer, or None when cairn is gone (or
        ``interrupt()`` became true while waiting). Requests from several threads are
        made one after the other."""
        with self._reading:
            if self.closed:
                return None
            self._seq += 1
            seq = self._seq
            message["seq"] = seq
            sent_before = self.send(message)
            while seq not in self._answers:
                if self.closed or (interrupt is not None and interrupt()):
                    return None
                self._receive(timeout=0.25 if interrupt is not None else None)
            answer = self._answers.pop(seq)
        if answer.get("type") == "ack" and self._unacked is not None:
            with self._lock:  # cairn stored what was sent before the request
                self._unacked.acknowledge(sent_before)
        return answer

    def sync(self, step, local_stop):
        """Agrees with the other ranks, through cairn, on whether to stop at ``step``."""
        message = {"type": "sync", "step": step}
        if local_stop:
            message["stop"] = local_stop
        answer = self.request(message)
        if answer is None:
            return
        if answer.get("type") == "error":  # a cairn without `sync`: act on `stop` alone
            self.agree_on_stop = False
            if self.stop_reason is None:
                self.stop_reason = self._cairn_stop
            return
        if answer.get("stop") and self.stop_reason is None:
            self.stop_reason = answer.get("reason") or "stop"

    # -- receiving --

    def poll(self):
        """Reads whatever cairn has sent, without blocking. While another thread waits
        for an answer, that thread reads (and records any stop) instead."""
        if not self.closed and self._reading.acquire(blocking=False):
            try:
                self._receive(timeout=0)
            finally:
                self._reading.release()

    def _receive(self, timeout):
        try:
            if timeout is not None:
                readable, _, _ = select.select([self._sock], [], [], timeout)
                if not readable:
                    return
            data = self._sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except (OSError, ValueError):
            data = b""
        if not data:
            self._on_closed()
            return
        self._inbox += data
        while True:
            end = self._inbox.find(b"\n")
            if end < 0:
                break
            line = bytes(self._inbox[:end])
            del self._inbox[:end + 1]
            self._dispatch(line)

    def _dispatch(self, line):
        try:
            message = json.loads(line)
        except ValueError:
            _warn("ignoring a malformed line from cairn: %r" % line[:200])
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if "re" in message:
            self._answers[message["re"]] = message
        elif kind == "welcome":
            self.welcome = message
        elif kind == "stop":
            reason = str(message.get("reason") or "stop")
            if self.agree_on_stop:
                self._cairn_stop = self._cairn_stop or reason
            elif self.stop_reason is None:
                self.stop_reason = reason
        elif kind == "error":
            self._fatal_error = str(message.get("message", "unknown error"))
            if self.welcome:
                _warn("cairn: %s" % self._fatal_error)
        # Unknown message types are ignored: newer cairns may send more.

    def _on_closed(self):
        if self.closed:
            return
        self.closed = True
        if self.stop_reason is None:
            self.stop_reason = "shutdown"
        if self.welcome:
            _warn("the control channel closed (cairn is gone); stopping at the next checkpoint")

    def forget_in_child(self):
        """In a forked child: closes the child's copy of the socket (the parent's stays
        open) and drops what the child inherited. The locks are new: another thread of
        the parent may have held them at the fork."""
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._batch = []
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.close()

    def close(self):
        self.flush()
        with self._lock:
            self.closed = True
            try:
                self._sock.close()
            except OSError:
                pass


class _UnackedReports:
    """Training reports cairn may not have stored yet, kept as the JSON text they were
    sent as, so that an orphan checkpoint can carry them (docs/protocol.md).

    cairn stores every training report it read before a validation or checkpoint_end in
    the same durable batch as that request, and only then acks it: an ack makes all the
    reports sent before its request durable. A request always follows a whole batch (the
    batch is sent first), so the batches sent are kept and released whole, each as the
    text of its reports joined by commas, exactly as it was sent: nothing per report,
    O(1) per batch, one string object per batch. More than ``limit`` reports kept: the
    oldest batches are dropped, and the record is incomplete until an ack covers them."""

    def __init__(self, limit):
        self._limit = limit
        self._batches = collections.deque()  # (reports joined by ",", how many)
        self._count = 0  # reports in _batches
        self._first = 0  # the number of batches ever released: _batches[0]'s index
        self._lost_until = 0  # batches before this index were dropped unacknowledged
        self._acknowledged = 0  # the highest mark cairn acknowledged

    def add(self, reports, count):
        self._batches.append((reports, count))
        self._count += count
        while self._count > self._limit and len(self._batches) > 1:
            self._release_first()
            self._lost_until = self._first

    def mark(self):
        """Identifies "every batch kept so far", for acknowledge()."""
        return self._first + len(self._batches)

    def acknowledge(self, mark):
        while self._batches and self._first < mark:
            self._release_first()
        self._acknowledged = max(self._acknowledged, mark)

    def complete(self):
        """False while reports were dropped and no ack has made them durable since."""
        return self._lost_until <= self._acknowledged

    def reports(self, max_step):
        """The kept reports with step <= max_step, each as its JSON text."""
        # `},{"step":` separates two reports and occurs nowhere else: inside a JSON
        # string every quote is escaped, so `{"` cannot occur there.
        return [r for joined, _ in self._batches
                for r in joined.replace('},{"step":', '}\n{"step":').split("\n")
                if _report_step(r) <= max_step]

    def _release_first(self):
        self._count -= self._batches.popleft()[1]
        self._first += 1


def _report_step(report):
    # Reports are formatted here as {"step":S,...}.
    return int(report[8:report.index(",", 8)])


def _connect(address):
    kind, _, where = address.partition(":")
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(where)
        except OSError:
            sock.close()
            raise
        return sock
    if kind == "tcp":
        host, _, port = where.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise ValueError("expected unix:PATH or tcp:HOST:PORT")


def _os_reason(error):
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


# -- stop signals -------------------------------------------------------------------------


class _StopSignals:
    """Turns the first SIGINT/SIGTERM into a request to checkpoint and stop; the second
    one acts as usual. Handlers are installed only where the script has none of its
    own.

    A child process of the trial (a DataLoader or multiprocessing worker) keeps only the
    SIGINT handler, quietly: a Ctrl-C reaches the whole process group, and a worker that
    died at once would fail the trial's next batch before the checkpoint that stops it.
    SIGTERM acts as usual there: Pool.terminate() and Process.terminate() stop workers
    with it, and a worker that took it for a stop request would never exit."""

    _NAMES = {signal.SIGINT: "interrupt", signal.SIGTERM: "terminate"}

    def __init__(self):
        self._reason = None
        self._previous = {}
        self._quiet = False  # a child process: the trial's process says it for everyone

    def install(self, child=False):
        if threading.current_thread() is not threading.main_thread():
            return
        self._quiet = child
        for signum in (signal.SIGINT,) if child else self._NAMES:
            current = signal.getsignal(signum)
            if current in (signal.SIG_DFL, signal.default_int_handler):
                self._previous[signum] = current
                signal.signal(signum, self._on_signal)

    def become_child(self):
        """In a forked child: SIGTERM back to what the script had (see the class)."""
        self._quiet = True
        previous = self._previous.pop(signal.SIGTERM, None)
        if previous is not None:
            with contextlib.suppress(ValueError):  # not the main thread: left as it is
                signal.signal(signal.SIGTERM, previous)

    def _on_signal(self, signum, frame):
        if self._reason is not None:
            signal.signal(signum, self._previous[signum])
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), signum)
            return
        self._reason = self._NAMES[signum]
        if self._quiet:
            return
        sys.stderr.write("\ncairn: %s: stopping at the next checkpoint (again to abort)\n" %
                         signal.Signals(signum).name)

    def stop_requested(self):
        return self._reason


# -- checkpoint targets --------------------------------------------------------------------


class _CairnCheckpoint:
    """A staging directory cairn created; cairn registers it on checkpoint_end."""

    def __init__(self, context, step, path):
        self._context = context
        self.step = step
        self.path = path

    def commit(self, metadata):
        channel = self._context._channel
        answer = channel.request({"type": "checkpoint_end", "step": self.step,
                                  "path": str(self.path), "metadata": metadata})
        if answer is None:  # cairn died after handing out the directory
            return _OrphanCheckpoint.adopt(self._context, self.step, self.path, metadata)
        if answer.get("type") == "error":
            _warn("checkpoint at step %d failed: %s" % (self.step, answer.get("message", "")))
            return None
        return answer.get("checkpoint")

    def abort(self):
        channel = self._context._channel
        if not channel.closed:
            channel.send({"type": "checkpoint_abort", "step": self.step, "path": str(self.path)})


class _StandaloneCheckpoints:
    """./checkpoints/ of a run without cairn, and its retention: of the checkpoints this
    process committed, the latest CAIRN_KEEP_LATEST (0 or less: all) are kept. Others
    found there (an earlier run's, another process's, the one being resumed) are never
    deleted: only what this process wrote is known to be superseded."""

    # Outputs, not code: git and cairn's code snapshot (which honours .gitignore files even
    # outside a git checkout) leave the directory out, so the next `cairn run` does not
    # record checkpoints as code and `cairn compare` does not list them as code changes.
    _GITIGNORE = "# written by the cairn SDK: checkpoints are outputs, not code\n*\n"

    def __init__(self, settings):
        self.root = settings["standalone_dir"]
        self._keep = settings["standalone_keep"]
        self._committed = collections.deque()
        self.root.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            with contextlib.suppress(OSError):  # a read-only checkout still trains
                ignore.write_text(self._GITIGNORE)

    def begin(self, step):
        return _StandaloneCheckpoint(self, step)

    def committed(self, path):
        if path in self._committed:  # the same step again: it replaced the old one
            self._committed.remove(path)
        self._committed.append(path)
        while self._keep > 0 and len(self._committed) > self._keep:
            shutil.rmtree(self._committed.popleft(), ignore_errors=True)


class _StandaloneCheckpoint:
    """./checkpoints/<step>/, written beside it and renamed into place when complete. The
    partial directory is this checkpoint's own: two checkpoints of one step may be open at
    once, and one must not delete or commit the other's files."""

    def __init__(self, checkpoints, step):
        self._checkpoints = checkpoints
        self.final = checkpoints.root / str(step)
        checkpoints.root.mkdir(parents=True, exist_ok=True)
        self.path = pathlib.Path(tempfile.mkdtemp(prefix=".partial-%d-" % step,
                                                  dir=checkpoints.root))

    def commit(self, metadata):
        _fsync_tree(self.path)
        shutil.rmtree(self.final, ignore_errors=True)
        os.rename(self.path, self.final)
        _fsync_dir(self.final.parent)
        sys.stderr.write("cairn: checkpoint saved in %s\n" % self.final)
        self._checkpoints.committed(self.final)
        return None

    def abort(self):
        shutil.rmtree(self.path, ignore_errors=True)


class _OrphanCheckpoint:
    """$CAIRN_ORPHAN_DIR/<step>/: a checkpoint written while cairn was gone, which cairn
    adopts when it comes back, with the metrics it may not have stored. The marker file
    is written last, atomically: a directory without it is incomplete."""

    def __init__(self, context, step):
        self._context = context
        self.step = step
        self.path = pathlib.Path(context._settings["orphan_dir"]) / str(step)
        _prepare_orphan_dir(self.path, context._settings)

    def commit(self, metadata):
        return _OrphanCheckpoint._mark(self._context, self.path, self.step, metadata)

    @staticmethod
    def skip(context, step, rng_state):
        """This rank did not enter the checkpoint of ``step``: its generator state and a
        marker saying so, so that the orphan the other ranks write is complete."""
        settings = context._settings
        if not settings["orphan_dir"]:
            return
        path = pathlib.Path(settings["orphan_dir"]) / str(step)
        try:
            _prepare_orphan_dir(path, settings)
            _write_rng_file(path, context.rank, rng_state)
            _mark_orphan(path, settings, step, {}, context._orphan_metrics(step),
                         entered=False)
        except OSError as e:
            _warn("cannot keep this rank's part of the checkpoint for step %d in %s: %s" %
                  (step, path, e))

    def abort(self):
        _remove_quietly(self.path / _orphan_marker_name(self._context.rank))

    @staticmethod
    def adopt(context, step, staging, metadata):
        """Moves a finished staging directory to the orphan directory and marks it."""
        settings = context._settings
        if not settings["orphan_dir"]:
            _warn("cairn is gone and CAIRN_ORPHAN_DIR is unset: checkpoint for step %d "
                  "left unregistered in %s" % (step, staging))
            return None
        target = pathlib.Path(settings["orphan_dir"]) / str(step)
        try:
            _prepare_orphan_dir(target, settings)
            for entry in staging.iterdir():
                _move(entry, target / entry.name)
        except OSError as e:
            _warn("cannot move the checkpoint for step %d to %s: %s" % (step, target, e))
            return None
        shutil.rmtree(staging, ignore_errors=True)
        return _OrphanCheckpoint._mark(context, target, step, metadata)

    @staticmethod
    def _mark(context, path, step, metadata):
        try:
            _mark_orphan(path, context._settings, step, metadata, context._orphan_metrics(step))
        except OSError as e:  # without its marker cairn ignores the directory
            _warn("cannot keep the checkpoint for step %d in %s: %s" % (step, path, e))
            return None
        _warn("cairn is gone: checkpoint for step %d kept in %s" % (step, path))
        return None


class _DiscardedCheckpoint:
    """A scratch directory for a checkpoint that cannot be kept, so the script's save
    code still runs unchanged."""

    def __init__(self, step, reason):
        self.step = step
        self.path = pathlib.Path(tempfile.mkdtemp(prefix="cairn-discarded-%d-" % step))
        if reason:
            _warn(reason)

    def commit(self, metadata):
        shutil.rmtree(self.path, ignore_errors=True)
        return None

    def abort(self):
        shutil.rmtree(self.path, ignore_errors=True)


def _orphan_or_discard(context, step):
    if context._settings["orphan_dir"]:
        try:
            return _OrphanCheckpoint(context, step)
        except OSError as e:
            return _DiscardedCheckpoint(
                step, "cannot create an orphan checkpoint for step %d: %s; it will not be "
                "kept" % (step, e))
    return _DiscardedCheckpoint(
        step, "cairn is gone and CAIRN_ORPHAN_DIR is unset: the checkpoint for step %d "
        "will not be kept" % step)


def _orphan_marker_name(rank):
    return _ORPHAN_MARKER if rank == 0 else "cairn_orphan.rank%d.json" % rank


def _prepare_orphan_dir(path, settings):
    if settings["world_size"] == 1:
        shutil.rmtree(path, ignore_errors=True)  # a stale attempt at the same step
    else:
        _remove_quietly(path / _orphan_marker_name(settings["rank"]))
    path.mkdir(parents=True, exist_ok=True)


class _OrphanMetrics:
    """Reports cairn may not have stored, as JSON text: cairn records them when it adopts
    the orphan checkpoint."""

    def __init__(self, training, validations, complete):
        self.training = training
        self.validations = validations
        self.complete = complete  # False: old training reports were dropped for memory


def _mark_orphan(path, settings, step, metadata, metrics, entered=True):
    if metrics is not None:
        for name, reports in ((_ORPHAN_TRAINING, metrics.training),
                              (_ORPHAN_VALIDATIONS, metrics.validations)):
            with open(path / name, "w", encoding="utf-8") as f:
                f.writelines(report + "\n" for report in reports)
    _fsync_tree(path)
    marker = {"protocol": PROTOCOL_VERSION, "trial": settings["trial_id"],
              "experiment": settings["experiment_id"], "step": step,
              "rank": settings["rank"], "world_size": settings["world_size"],
              "metadata": metadata, "created": time.time()}
    if metrics is not None:
        marker["metrics_complete"] = metrics.complete
    if not entered:
        marker["entered"] = False
    _write_atomically(path / _orphan_marker_name(settings["rank"]),
                      json.dumps(marker, allow_nan=False).encode())


def _move(source, target):
    try:
        os.rename(source, target)
    except OSError:  # another file system
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)


def _write_atomically(path, data):
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(temporary, path)
    _fsync_dir(path.parent)


def _fsync_tree(root):
    for directory, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError), open(os.path.join(directory, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(directory)


def _fsync_dir(path):
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_quietly(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


# -- random generators -----------------------------------------------------------------------


def _seed_generators(seed, deterministic):
    random.seed(seed)
    if deterministic:
        # Must be in the environment before CUDA initialises; harmless without CUDA.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if os.environ.get("PYTHONHASHSEED") in (None, "", "random"):
            _warn("deterministic mode: set PYTHONHASHSEED (e.g. 0) before Python starts; "
                  "str hashes, and so set order, still vary between runs")
    # Each also says once whether the OpenBLAS it loaded runs older kernels than the CPU has.
    hooks = {"numpy": lambda numpy: (_seed_numpy(numpy, seed), _check_blas()),
             "torch": lambda torch: (_seed_torch(torch, seed, deterministic), _check_blas())}
    pending = {}
    for name, hook in hooks.items():
        if name in sys.modules:
            _run_hook(name, hook, sys.modules[name])
        else:
            pending[name] = hook
    if pending:
        sys.meta_path.insert(0, _SeedOnImport(pending))


# OpenBLAS's x86-64 core types by the instruction set their kernels need, oldest first: the
# table of trainer/blas_core_type.cc, as levels (SSE2 … AVX-512 BF16).
_BLAS_LEVELS = {
    "northwood": 1, "opteron": 1, "prescott": 2, "opteron_sse3": 2, "barcelona": 2,
    "atom": 3, "core2": 3, "penryn": 3, "dunnington": 3, "nano": 3, "bobcat": 3,
    "nehalem": 4, "sandybridge": 5, "bulldozer": 5, "piledriver": 5, "steamroller": 5,
    "excavator": 6, "haswell": 6, "zen": 6, "skylakex": 7, "cooperlake": 8,
    "sapphirerapids": 8,
}
# How OpenBLAS builds name the function: plain, with 64-bit integers (NumPy's and SciPy's
# wheels), and SciPy's prefixed build.
_BLAS_CORENAME = ("openblas_get_corename", "openblas_get_corename64_",
                  "scipy_openblas_get_corename64_")
_blas_checked = False


def _loaded_openblas():
    """[(library file, core type)] of each OpenBLAS loaded in this process: the files
    mapped (/proc/self/maps) whose name says BLAS, asked for openblas_get_corename through
    ctypes with RTLD_NOLOAD, which never loads a library that is not there."""
    try:
        import ctypes
        with open("/proc/self/maps") as maps:
            files = []
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    path = fields[5].strip()
                    name = os.path.basename(path).lower()
                    if "blas" in name and ".so" in name and path not in files:
                        files.append(path)
    except (ImportError, OSError):
        return []
    found = []
    for path in files:
        try:
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        for symbol in _BLAS_CORENAME:
            function = getattr(library, symbol, None)
            if function is None:
                continue
            function.restype = ctypes.c_char_p
            function.argtypes = []
            core = function()
            if core:
                found.append((path, core.decode("ascii", "replace")))
            break
    return found


def _check_blas():
    """Says once, on stderr (the trial's log), when an OpenBLAS the trial loaded runs
    older kernels than the ones cairn would choose for this CPU (CAIRN_BLAS_CORE), and
    what to set. It changes nothing: a trial's numerics are its own."""
    global _blas_checked
    advice = os.environ.get("CAIRN_BLAS_CORE", "")
    if _blas_checked or not advice or os.environ.get("OPENBLAS_CORETYPE"):
        return
    loaded = _loaded_openblas()
    if not loaded:
        return  # not yet: NumPy or torch may load one later
    _blas_checked = True
    best = _BLAS_LEVELS.get(advice.lower(), 0)
    for path, core in loaded:
        level = _BLAS_LEVELS.get(core.lower())
        if level is not None and level < best:
            _warn("%s runs OpenBLAS's %s kernels on a CPU that supports %s's; set "
                  "OPENBLAS_CORETYPE=%s (in the config's environment:) to use them: faster, "
                  "and the numerics change, so cairn does not set it for you" %
                  (path, core, advice, advice))
            return


def _seed_numpy(numpy, seed):
    numpy.random.seed(seed % (1 << 32))


def _seed_torch(torch, seed, deterministic):
    torch.manual_seed(seed % (1 << 64))
    if not deterministic:
        return
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # refused once inter-op work has started
        torch.set_num_interop_threads(1)


def _run_hook(name, hook, module):
    try:
        hook(module)
    except Exception as e:
        _warn("could not seed %s: %s" % (name, e))


class _SeedOnImport:
    """A meta-path finder that seeds NumPy/torch the moment the script first imports
    them, so a trial that never uses torch does not pay seconds for importing it."""

    def __init__(self, hooks):
        self._hooks = hooks

    def find_spec(self, fullname, path=None, target=None):
        # The hook is spent only when the module runs: importlib.util.find_spec() alone
        # (libraries probe for torch that way) must not use it up.
        if fullname not in self._hooks:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _SeedingLoader(spec.loader, fullname, self._hooks)
        return spec


class _SeedingLoader:
    def __init__(self, loader, name, hooks):
        self._loader = loader
        self._name = name
        self._hooks = hooks

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # Put the real loader back first, so the module looks as if we were never there.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        hook = self._hooks.pop(self._name, None)
        if hook is not None:
            _run_hook(self._name, hook, module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _capture_rng():
    """The state of every random generator the script uses, as plain Python values (so
    reading it back needs neither NumPy nor torch)."""
    state = {"version": 1, "python": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kind, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = (kind, [int(k) for k in keys], int(pos), int(has_gauss),
                          float(cached))
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = bytes(torch.get_rng_state().tolist())
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            state["torch_cuda"] = [bytes(s.tolist()) for s in cuda.get_rng_state_all()]
    return state


def _restore_rng_state(state):
    random.setstate(state["python"])
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        numpy.random.set_state((kind, numpy.array(keys, dtype=numpy.uint32), pos, has_gauss,
                                cached))
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in state:
        torch.set_rng_state(torch.tensor(list(state["torch"]), dtype=torch.uint8))
        cuda_states = state.get("torch_cuda")
        if cuda_states and torch.cuda.is_available() and \
                torch.cuda.device_count() == len(cuda_states):
            torch.cuda.set_rng_state_all(
                [torch.tensor(list(s), dtype=torch.uint8) for s in cuda_states])


def _rng_file_name(rank):
    return "cairn_rng_state.pkl" if rank == 0 else "cairn_rng_state.rank%d.pkl" % rank


def _write_rng_file(directory, rank, state):
    try:
        with open(directory / _rng_file_name(rank), "wb") as f:
            pickle.dump(state, f, protocol=4)
    except OSError as e:
        _warn("cannot save the random generators' state: %s" % e)
