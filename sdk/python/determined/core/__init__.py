"""Determined's Core API (det.core) over cairn's Python SDK: see docs/determined.md."""

from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext, SearcherMode, SearcherOperation, Unit
from determined.core._checkpoint import CheckpointContext, DownloadMode
from determined.core._train import EarlyExitReason, TrainContext
from determined.core._context import Context, TensorboardMode, init

__all__ = ["CheckpointContext", "Context", "DistributedContext", "DownloadMode",
           "DummyDistributedContext", "EarlyExitReason", "PreemptContext", "PreemptMode",
           "SearcherContext", "SearcherMode", "SearcherOperation", "TensorboardMode",
           "TrainContext", "Unit", "init"]
