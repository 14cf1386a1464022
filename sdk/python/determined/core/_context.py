"""core.init() and the Context it returns: the SDK's cairn.init() with Determined's
sub-contexts over it. Outside cairn (no CAIRN_TRIAL_ID) it runs standalone, like
Determined's local mode: cairn's SDK prints metrics and keeps checkpoints in
./checkpoints/."""

import enum
import logging

import cairn
from determined import _info
from determined.core import _distributed
from determined.core._checkpoint import CheckpointContext
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext
from determined.core._train import TrainContext

logger = logging.getLogger("determined.core")


class TensorboardMode(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"


class _State:
    """What the sub-contexts share: reports made, checkpoints stored."""

    def __init__(self):
        self.last_step = 0
        self.validations = {}  # step -> metrics reported (the chief's)
        self.stored = {}  # storage id -> metadata, of checkpoints stored by this process
        self.progress = 0.0


class _Profiler:
    def on(self, *args, **kwargs):
        pass

    def off(self, *args, **kwargs):
        pass


class Context:
    """Use as ``with det.core.init() as core_context:``."""

    def __init__(self, distributed, preempt_mode):
        self._cairn = cairn.init()
        state = _State()
        self.distributed = distributed
        self.train = TrainContext(self._cairn, distributed, state)
        self.checkpoint = CheckpointContext(self._cairn, distributed, state)
        self.preempt = PreemptContext(self._cairn, distributed, preempt_mode)
        self.searcher = SearcherContext(self._cairn, distributed, state)
        self.info = _info.get_cluster_info()
        self.profiler = _Profiler()
        if distributed.size > 1:
            # From here on, a rank that is not saving a checkpoint is not part of it: the
            # chief alone may save one (store_path(shard=False)) without waiting for the
            # others' next call (docs/determined.md).
            self._cairn.barrier()

    def start(self):
        pass

    def close(self, exc=None):
        pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, typ, value, tb):
        self.close(value)
        return False


def init(*, distributed=None, checkpoint_storage=None,
         preempt_mode=PreemptMode.WorkersAskChief, tensorboard_mode=TensorboardMode.AUTO,
         **kwargs):
    """Determined's core.init(). ``distributed`` may be left out for a multi-rank trial:
    cairn's ranks are known from the environment. ``checkpoint_storage`` is ignored with a
    warning: checkpoints go to cairn's store."""
    if checkpoint_storage is not None:
        logger.warning("core.init(checkpoint_storage=...) is ignored: cairn keeps checkpoints "
                       "in its store (docs/determined.md)")
    if distributed is None:
        distributed = _distributed.from_environment()
    return Context(distributed, preempt_mode)
