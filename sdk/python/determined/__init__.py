"""cairn's `determined` package: Determined's Core API over cairn's Python SDK.

Training scripts written for Determined (`import determined as det`) run as cairn trials
unchanged: cairn writes this package beside its own `cairn` module on the trial's
PYTHONPATH. Everything here is implemented with cairn's SDK (`import cairn`); nothing talks
to a Determined master. What maps to what, and what is not supported, is in
docs/determined.md. Standard library only.
"""

from determined import _unsupported
from determined._info import ClusterInfo, RendezvousInfo, ResourcesInfo, TrialInfo, get_cluster_info
from determined import core

__version__ = "0.38.0+cairn"

# The log format Determined's scripts pass to logging.basicConfig.
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"

_unsupported.install()

__all__ = ["ClusterInfo", "RendezvousInfo", "ResourcesInfo", "TrialInfo", "core",
           "get_cluster_info", "LOG_FORMAT"]
