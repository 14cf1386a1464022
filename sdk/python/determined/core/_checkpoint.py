"""CheckpointContext: Determined's storage ids over cairn's checkpoints.

store_path() opens a cairn checkpoint (cairn.Context.checkpoint) at the step
metadata["steps_completed"] and yields its directory with a fresh storage id; when the
block ends cairn stores it (content-addressed, under cairn's retention). The id is kept
in the checkpoint (determined_checkpoint.json) and in cairn's checkpoint metadata
("determined_storage_id"), so that a resumed trial's latest_checkpoint is the id the
script was given. Inside a trial, restore_path() reaches the checkpoint the trial resumes
from (cairn materialises it before the trial starts) in place, and any other stored
checkpoint (of any experiment in the store, by its storage id or cairn's id) as a fresh
copy cairn writes on the trial's machine (cairn.Context.fetch_checkpoint), removed when the
restore_path block ends."""

import contextlib
import enum
import json
import os
import pathlib
import shutil
import uuid

from determined import _info


class DownloadMode(enum.Enum):
    LocalWorkersShareDownload = "LocalWorkersShareDownload"
    NoSharedDownload = "NoSharedDownload"


class CheckpointContext:
    def __init__(self, cairn_context, distributed, state):
        self._ctx = cairn_context
        self._dist = distributed
        self._state = state

    @contextlib.contextmanager
    def store_path(self, metadata=None, *, shard=False):
        """Yields (path, storage_id). shard=False: the chief alone calls it; shard=True:
        every rank calls it and writes its own files into the one directory."""
        metadata = dict(metadata or {})
        if "steps_completed" not in metadata:
            raise ValueError("metadata must include a 'steps_completed' key")
        step = int(metadata["steps_completed"])
        if not shard and self._dist.rank != 0:
            raise RuntimeError("cannot call CheckpointContext.store_path(shard=False) from "
                               "non-chief worker (rank=%d)" % self._dist.rank)
        storage_id = str(uuid.uuid4()) if self._dist.rank == 0 else None
        if shard:
            storage_id = self._dist.broadcast(storage_id)
            metadata = _merged(self._dist.allgather(metadata))
        stored = dict(metadata)
        stored["determined_storage_id"] = storage_id
        with self._ctx.checkpoint(step, metadata=stored) as path:
            if shard:
                # Every rank has begun this checkpoint before any can end it: cairn then
                # waits for all of them (a rank that had not begun would count as absent).
                self._ctx.barrier()
            yield pathlib.Path(path), storage_id
            if self._dist.rank == 0:
                with open(os.path.join(path, "metadata.json"), "w", encoding="utf-8") as f:
                    json.dump(metadata, f, indent=2, sort_keys=True)
                with open(os.path.join(path, _info.CHECKPOINT_RECORD), "w",
                          encoding="utf-8") as f:
                    json.dump({"storage_id": storage_id,
                               "trial_id": _info.get_cluster_info().trial.trial_id
                               if _info.get_cluster_info() else None}, f)
        self._state.stored[storage_id] = metadata

    def upload(self, ckpt_dir, metadata=None, *, shard=False, selector=None):
        """Stores a copy of the local directory ``ckpt_dir``; returns its storage id.
        Without metadata["steps_completed"], the latest step reported is used."""
        metadata = dict(metadata or {})
        metadata.setdefault("steps_completed", self._state.last_step)
        with self.store_path(metadata, shard=shard) as (path, storage_id):
            if ckpt_dir is not None:
                _copy_tree(pathlib.Path(ckpt_dir), path, selector)
        return storage_id

    @contextlib.contextmanager
    def restore_path(self, storage_id, download_mode=DownloadMode.LocalWorkersShareDownload,
                     *, selector=None):
        with self._path_of(storage_id) as path:
            yield path

    def download(self, storage_id, ckpt_dir, download_mode=DownloadMode.LocalWorkersShareDownload,
                 *, selector=None):
        """Copies the checkpoint into ``ckpt_dir`` (created if missing)."""
        target = pathlib.Path(ckpt_dir)
        target.mkdir(parents=True, exist_ok=True)
        with self._path_of(storage_id) as source:
            _copy_tree(source, target, selector)

    def get_metadata(self, storage_id):
        if storage_id in self._state.stored:
            return dict(self._state.stored[storage_id])
        try:
            with self._path_of(storage_id) as path:
                with open(path / "metadata.json", encoding="utf-8") as f:
                    return json.load(f)
        except FileNotFoundError:
            return {}

    def delete(self, storage_id):
        raise NotImplementedError("cairn's retention (checkpoint.keep_*) and `cairn gc` delete "
                                  "checkpoints, not the trial (docs/determined.md)")

    @contextlib.contextmanager
    def _path_of(self, storage_id):
        """The checkpoint's directory: the trial's own latest in place, any other a copy
        cairn writes for this rank (removed afterwards). FileNotFoundError when the store
        has no usable checkpoint by that id."""
        path = _info.latest_checkpoint_path()
        if path is not None and storage_id == _info.latest_checkpoint_id(path):
            yield path
            return
        try:
            fetched = self._ctx.fetch_checkpoint(str(storage_id))
        except RuntimeError as e:  # standalone, or cairn is gone
            raise FileNotFoundError("checkpoint %r: %s (docs/determined.md)" % (storage_id, e))
        try:
            yield fetched["path"]
        finally:
            shutil.rmtree(fetched["path"], ignore_errors=True)


def _merged(all_metadata):
    merged = {}
    for m in all_metadata:
        merged.update(m or {})
    return merged


def _copy_tree(source, target, selector):
    for root, _, files in os.walk(source):
        for name in files:
            full = pathlib.Path(root) / name
            rel = full.relative_to(source).as_posix()
            if selector is not None and not selector(rel):
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(full, target / rel)
