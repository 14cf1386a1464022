"""End to end: on a GPU machine, slots are GPUs and each trial (each rank) gets its own
through CUDA_VISIBLE_DEVICES (SPEC §4; issue 4 item 4, issue 6 item 1).

The GPUs are tests/fake_cuda's emulated driver (libcuda.so.1 from the build's fake_cuda/
directory, put first on LD_LIBRARY_PATH): FAKE_CUDA_DEVICES sets how many the machine has
and, like the real driver, it counts only those CUDA_VISIBLE_DEVICES lists. What is under
test is cairn's own part, which no GPU is needed for: counting the GPUs, one slot per GPU
by default, handing each running trial and each rank a GPU no other running trial holds,
naming them as cairn's own CUDA_VISIBLE_DEVICES names them, and sharing GPUs round robin
when --slots asks for more slots than there are GPUs. The trials are Python SDK scripts
that record what they were given and wait for each other (with a deadline), so the test
sees which of them ran at the same time."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

FAKE_CUDA = os.path.join(os.path.dirname(os.path.abspath(CAIRN)), "fake_cuda")

# Each process appends "start ID RANK DEVICES" and "end ID RANK" to events.log; the first
# TOGETHER trials (by trial number) wait until all of them have started, so they must have
# been given slots at the same time.
TRIAL = r'''
import os, sys, time
import cairn

ctx = cairn.init()
trial = os.environ["CAIRN_TRIAL_ID"]
rank = os.environ.get("RANK", "0")
log = os.path.join(LOGDIR, "events.log")
def event(text):
    with open(log, "a") as f:
        f.write(text + "\n")
event("start %s %s %s" % (trial, rank, os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")))
number = int(trial.split(".")[1])
if number <= TOGETHER:
    deadline = time.monotonic() + 60
    while True:
        started = [l for l in open(log) if l.startswith("start")]
        if len(started) >= TOGETHER * RANKS:
            break
        if time.monotonic() > deadline:
            sys.exit("only %d of %d processes started together" % (len(started), TOGETHER * RANKS))
        time.sleep(0.02)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": float(number)})
event("end %s %s" % (trial, rank))
'''

CONFIG = """name: gpu-slots
entrypoint: /usr/bin/python3 trial.py
hyperparameters:
  x: {type: categorical, vals: [VALS]}
searcher: {name: grid, metric: val_loss, max_length: 1}
resources: {slots_per_trial: RANKS}
max_restarts: 0
"""


class GpuSlotsTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        # Built with the tests: missing is a failure, not a skip.
        self.assertTrue(os.path.exists(os.path.join(FAKE_CUDA, "libcuda.so.1")),
                        "needs the build's tests/fake_cuda driver emulation (build/fake_cuda)")

    def run_trials(self, trials, together, gpus, ranks=1, slots=None, visible=None):
        self.write("trial.py", TRIAL.replace("LOGDIR", repr(self.dir))
                   .replace("TOGETHER", str(together)).replace("RANKS", str(ranks)))
        self.write("exp.yaml", CONFIG.replace("VALS", ", ".join(str(i) for i in range(trials)))
                   .replace("RANKS", str(ranks)))
        env = {"FAKE_CUDA_DEVICES": str(gpus),
               "LD_LIBRARY_PATH": FAKE_CUDA + ":" + os.environ.get("LD_LIBRARY_PATH", "")}
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        self.cairn("init", check=0)
        args = ["run", "exp.yaml"] + (["--slots", str(slots)] if slots else [])
        proc = self.cairn(*args, env=env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return self.events()

    def events(self):
        """[(kind, trial, rank, devices)] in the order they happened, and the most processes
        that ran at once."""
        running, most, out = set(), 0, []
        with open(os.path.join(self.dir, "events.log")) as f:
            lines = f.read().splitlines()
        for line in lines:
            kind, trial, rank, *rest = line.split()
            out.append((kind, trial, rank, rest[0] if rest else None))
            if kind == "start":
                running.add((trial, rank))
            else:
                running.discard((trial, rank))
            most = max(most, len(running))
        return out, most

    def devices_of(self, events):
        return {(t, r): d for kind, t, r, d in events if kind == "start"}

    def test_one_slot_per_gpu_and_each_running_trial_has_its_own(self):
        # 3 GPUs on a 2-core machine: the default slots follow the GPUs, not the cores.
        events, most = self.run_trials(trials=5, together=3, gpus=3)
        self.assertEqual(most, 3, events)
        devices = self.devices_of(events)
        self.assertEqual(len(devices), 5)
        self.assertTrue(set(devices.values()) <= {"0", "1", "2"}, devices)
        running = {}
        for kind, trial, rank, d in events:
            if kind == "start":
                self.assertNotIn(d, running.values(), "GPU %s given twice at once" % d)
                running[(trial, rank)] = d
            else:
                del running[(trial, rank)]

    def test_gpus_are_named_as_cairns_own_cuda_visible_devices_names_them(self):
        events, most = self.run_trials(trials=2, together=2, gpus=4, visible="2,3")
        self.assertEqual(most, 2, events)
        self.assertEqual(sorted(self.devices_of(events).values()), ["2", "3"])

    def test_each_rank_of_a_data_parallel_trial_gets_its_own_gpu(self):
        events, most = self.run_trials(trials=1, together=1, gpus=2, ranks=2)
        self.assertEqual(most, 2, events)
        devices = self.devices_of(events)
        self.assertEqual(sorted(devices), [("1.1", "0"), ("1.1", "1")])
        self.assertEqual(sorted(devices.values()), ["0", "1"])

    def test_more_slots_than_gpus_share_them_round_robin(self):
        events, most = self.run_trials(trials=4, together=4, gpus=2, slots=4)
        self.assertEqual(most, 4, events)
        shares = collections.Counter(self.devices_of(events).values())
        self.assertEqual(shares, {"0": 2, "1": 2})


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
