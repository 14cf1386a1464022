"""python3 -m determined.launch.torch_distributed [TORCH_OVERRIDES... --] SCRIPT...

In a cairn trial every rank already runs this command with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT set (what torchrun would set), so it replaces itself with
SCRIPT (exec: signals reach the worker directly). Overrides for torchrun are ignored with
a warning, except that they may not ask for more than one process per rank."""

import os
import sys


def parse_args(args):
    overrides = []
    if "--" in args:
        split = args.index("--")
        overrides, args = args[:split], args[split + 1:]
    if args[:1] == ["--trial"]:
        raise SystemExit("determined.launch.torch_distributed --trial: Trial classes are not "
                         "supported by cairn; use a Core API script (docs/determined.md)")
    if not args:
        raise SystemExit("usage: python3 -m determined.launch.torch_distributed "
                         "[TORCH_OVERRIDES... --] SCRIPT...")
    return overrides, args


def main(argv):
    overrides, script = parse_args(argv)
    if overrides:
        sys.stderr.write("determined.launch.torch_distributed: ignoring torchrun arguments %s: "
                         "cairn starts one process per rank (resources.slots_per_trial)\n" %
                         " ".join(overrides))
    os.environ.setdefault("GROUP_RANK", "0")
    os.environ.setdefault("GROUP_WORLD_SIZE", "1")
    os.environ.setdefault("ROLE_RANK", os.environ.get("RANK", "0"))
    os.environ.setdefault("ROLE_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1"))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(script[0], script)
    except OSError as e:
        raise SystemExit("determined.launch.torch_distributed: cannot run %s: %s" %
                         (script[0], e.strerror))


if __name__ == "__main__":
    main(sys.argv[1:])
