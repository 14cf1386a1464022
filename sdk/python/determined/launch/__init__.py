"""Determined's launchers. cairn starts one process per rank itself (resources.
slots_per_trial), with torchrun's variables set, so a launcher here runs the worker
command in the rank's process instead of starting workers."""
