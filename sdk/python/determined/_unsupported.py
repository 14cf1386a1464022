"""Submodules of Determined's package that cairn's does not carry: importing one raises an
ImportError that says so and where to read why, instead of Python's bare "No module
named", so that a script written for Determined's Trial APIs fails with a pointer."""

import sys

_DOCS = "docs/determined.md"

# The submodules cairn carries; anything else under `determined.` is refused.
_SUPPORTED = {
    "determined._info", "determined._unsupported", "determined.core",
    "determined.core._context", "determined.core._distributed", "determined.core._train",
    "determined.core._checkpoint", "determined.core._preempt", "determined.core._searcher",
    "determined.launch", "determined.launch.torch_distributed",
    "determined.launch.wrap_rank",
}


class _Refuse:
    """Last on sys.meta_path: reached only when no other finder found the module."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("determined.") or fullname in _SUPPORTED:
            return None
        raise ImportError(
            "%s is not supported by cairn's determined package (it implements the Core API "
            "only): see %s in cairn's documentation for what is supported and what to use "
            "instead" % (fullname, _DOCS), name=fullname)


def install():
    if not any(isinstance(f, _Refuse) for f in sys.meta_path):
        sys.meta_path.append(_Refuse())
