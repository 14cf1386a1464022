"""python3 -m determined.launch.wrap_rank [--no-redirect-stdio] RANK SCRIPT...

Determined prefixes each worker's output with its rank. cairn keeps every rank's output
apart already (`cairn logs --rank`), so this checks RANK (an integer, or names of
environment variables holding it) and replaces itself with SCRIPT."""

import os
import sys


def main(argv):
    args = list(argv)
    if args[:1] == ["--no-redirect-stdio"]:
        args = args[1:]
    if not args:
        raise SystemExit("usage: python3 -m determined.launch.wrap_rank [--no-redirect-stdio] "
                         "RANK SCRIPT...")
    rank_arg, script = args[0], args[1:]
    if script[:1] == ["--"]:
        script = script[1:]
    if not rank_arg.isdigit():
        for name in rank_arg.split(","):
            if name in os.environ:
                break
        else:
            sys.stderr.write("rank environment variable is set to %s, but it is not in "
                             "os.environ\n" % rank_arg)
            return 1
    if not script:
        raise SystemExit("determined.launch.wrap_rank: no worker command")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(script[0], script)
    except OSError as e:
        raise SystemExit("determined.launch.wrap_rank: cannot run %s: %s" % (script[0], e.strerror))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
