"""det.get_cluster_info(): what Determined told a task about itself, from the environment
cairn gives every rank (docs/protocol.md, "Environment"). Opens no control connection:
a launcher may call it before it starts its workers."""

import json
import os
import pathlib
import socket

# What the package writes into each checkpoint it stores (core/_checkpoint.py): the
# storage id the script was given, so that a resumed trial's latest_checkpoint is that id.
CHECKPOINT_RECORD = "determined_checkpoint.json"


def _int(name, default=0):
    text = os.environ.get(name, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        return default


class RendezvousInfo:
    """Each rank of a cairn trial is a one-slot container on this machine."""

    def __init__(self, container_addrs, container_rank, container_slot_counts):
        self.container_addrs = container_addrs
        self.container_rank = container_rank
        self.container_slot_counts = container_slot_counts


class TrialInfo:
    def __init__(self, trial_id, experiment_id, trial_seed, hparams, config, steps_completed,
                 trial_run_id, debug=False):
        self.trial_id = trial_id
        self.experiment_id = experiment_id
        self.trial_seed = trial_seed
        self.hparams = hparams
        self._config = config
        self._steps_completed = steps_completed
        self._trial_run_id = trial_run_id
        self._debug = debug


class ResourcesInfo:
    def __init__(self, gpu_uuids):
        self._gpu_uuids = gpu_uuids

    @property
    def gpu_uuids(self):
        return list(self._gpu_uuids)


class ClusterInfo:
    def __init__(self, trial_info, rendezvous_info, resources_info, latest_checkpoint,
                 slot_ids, task_id):
        self.master_url = ""  # there is no master
        self.cluster_id = "cairn"
        self.agent_id = socket.gethostname()
        self.slot_ids = slot_ids
        self.task_id = task_id
        self.allocation_id = task_id
        self.session_token = ""
        self.task_type = "TRIAL"
        self._trial_info = trial_info
        self._rendezvous_info = rendezvous_info
        self._resources_info = resources_info
        self._latest_checkpoint = latest_checkpoint

    @property
    def latest_checkpoint(self):
        return self._latest_checkpoint

    @property
    def user_data(self):
        """The experiment config's ``data`` map, as in Determined ({} when it has none)."""
        return dict(self._trial_info._config.get("data", {})) if self._trial_info else {}

    @property
    def trial(self):
        return self._trial_info

    @property
    def container_addrs(self):
        return list(self._rendezvous_info.container_addrs)

    @property
    def container_slot_counts(self):
        return list(self._rendezvous_info.container_slot_counts)

    @property
    def container_rank(self):
        return self._rendezvous_info.container_rank

    @property
    def gpu_uuids(self):
        return self._resources_info.gpu_uuids


def latest_checkpoint_path():
    path = os.environ.get("CAIRN_LATEST_CHECKPOINT", "")
    return pathlib.Path(path).resolve() if path else None


def latest_checkpoint_id(path):
    """The storage id of the checkpoint in ``path``: the one the script was given when it
    stored it, or "cairn-latest" for one stored without this package."""
    if path is None:
        return None
    try:
        with open(path / CHECKPOINT_RECORD, encoding="utf-8") as f:
            return str(json.load(f)["storage_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return "cairn-latest"


def _user_data():
    text = os.environ.get("CAIRN_USER_DATA", "").strip()
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _hparams():
    text = os.environ.get("CAIRN_HPARAMS", "").strip()
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


_cached = None


def get_cluster_info():
    """The ClusterInfo of this cairn trial's rank, or None outside a cairn trial."""
    global _cached
    if not os.environ.get("CAIRN_TRIAL_ID"):
        return None
    if _cached is not None:
        return _cached
    rank = _int("RANK")
    size = max(1, _int("WORLD_SIZE", 1))
    slots = [int(s) for s in os.environ.get("CAIRN_SLOTS", "").split(",") if s.strip().isdigit()]
    # One slot per rank: a launcher that starts one worker per slot starts exactly one.
    if size > 1:
        slot_ids = [slots[rank]] if rank < len(slots) else []
    else:
        slot_ids = slots
    trial = TrialInfo(
        trial_id=_int("CAIRN_TRIAL_NUMBER"),
        experiment_id=_int("CAIRN_EXPERIMENT_ID"),
        # Determined's seeds fit 31 bits; scripts pass them to NumPy, which takes 32.
        trial_seed=_int("CAIRN_SEED") % (1 << 31),
        hparams=_hparams(),
        # The experiment config as Determined gives it: here only its `data` map.
        config={"data": _user_data()} if _user_data() else {},
        steps_completed=_int("CAIRN_STEPS_COMPLETED"),
        trial_run_id=1)
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1") or "127.0.0.1"
    rendezvous = RendezvousInfo([addr] * size, rank, [1] * size)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    resources = ResourcesInfo([d for d in visible.split(",") if d.strip()])
    _cached = ClusterInfo(trial, rendezvous, resources,
                          latest_checkpoint_id(latest_checkpoint_path()), slot_ids,
                          os.environ.get("CAIRN_TRIAL_ID", ""))
    return _cached
