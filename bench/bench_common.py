"""Helpers shared by the benchmark drivers in bench/."""
import datetime
import os
import pathlib
import platform
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parent.parent


def default_cairn():
    return os.environ.get("CAIRN_BIN") or str(SOURCE / "build" / "cairn")


def run_checked(command, cwd=None, env=None):
    """Runs a command, exiting with its output when it fails."""
    full_env = dict(os.environ)
    full_env.pop("CAIRN_DIR", None)  # every run uses the store its directory gets
    for name, value in (env or {}).items():  # None removes a variable
        if value is None:
            full_env.pop(name, None)
        else:
            full_env[name] = value
    proc = subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("bench: %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(map(str, command)), proc.returncode, proc.stdout, proc.stderr))
    return proc


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_summary(cairn):
    version = subprocess.run([cairn, "--version"], capture_output=True, text=True).stdout.strip()
    return ("date: %s\nmachine: %s, %d cores (%s), %s\ncairn: %s (%s)\nload average before: %.2f"
            % (datetime.datetime.now().isoformat(timespec="seconds"), platform.node(),
               os.cpu_count(), cpu_model(), platform.platform(), cairn, version or "?",
               os.getloadavg()[0]))
