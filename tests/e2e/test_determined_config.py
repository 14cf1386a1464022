"""End to end: Determined's experiment YAML as it is, under the real `cairn run` (docs/
determined.md, "Determined's experiment config"). Keys whose meaning cairn maps: a `data`
map read by the script through det.get_cluster_info().user_data, `async_halving` as one
bracket of `num_rungs` rungs, Determined's defaults for a config with any of its keys
(stated in `show`), `log_policies` cancelling a failed trial's restarts on a matching line;
and cairn's own rule that a trial failing twice with the same last line and nothing
reported (a syntax error) is not restarted again, counted from the store.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

# Pre-0.38 Core API: operations, a validation at each op.length, its storage-id checkpoint.
OPERATIONS = r'''
import json, os, time
import determined as det

info = det.get_cluster_info()
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "seen.jsonl"), "a") as f:
    f.write(json.dumps({"trial_id": info.trial.trial_id, "user_data": info.user_data}) + "\n")
with det.core.init() as core_context:
    steps = 0
    if info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            steps = json.loads((path / "state.json").read_text())["steps"]
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            core_context.train.report_training_metrics(steps, {"loss": 1.0 / steps})
        metric = info.trial.hparams["x"] / steps
        core_context.train.report_validation_metrics(steps, {"val_loss": metric})
        with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
            (path / "state.json").write_text(json.dumps({"steps": steps}))
        op.report_completed(metric)
        if core_context.preempt.should_preempt():
            break
'''


class DeterminedConfigTest(CairnTestCase):
    def run_config(self, config):
        proc = self.cairn("run", config, timeout=300)
        self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
        return proc

    def seen(self):
        with open(os.path.join(self.dir, "seen.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def trials(self, experiment="1"):
        return self.cairn_json("show", experiment, "--json")["trials"]

    def test_a_determined_yaml_runs_as_is_with_its_data_async_halving_and_defaults(self):
        self.write("train.py", OPERATIONS)
        self.write("det.yaml", """name: det-native
entrypoint: /usr/bin/python3 train.py
data:
  url: s3://bucket/mnist
  batch_size: 64
  splits: [train, val]
hyperparameters:
  x: {type: double, minval: 0.5, maxval: 2.0}
searcher:
  name: async_halving
  metric: val_loss
  max_length: 16
  max_trials: 4
  num_rungs: 2
resources:
  slots_per_trial: 1
  devices: ["/dev/infiniband:/dev/infiniband"]
reproducibility:
  experiment_seed: 4242
min_validation_period: {batches: 4}
records_per_epoch: 60000
checkpoint_policy: best
""")
        proc = self.run_config("det.yaml")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # One warning for each key that changes nothing here, naming what cairn does.
        warnings = [line for line in proc.stderr.splitlines() if "cairn: warning:" in line]
        self.assertEqual([w.split(": ")[2:4] for w in warnings],
                         [["det.yaml:17", "resources.devices"],
                          ["det.yaml:20", "min_validation_period"],
                          ["det.yaml:21", "records_per_epoch"],
                          ["det.yaml:22", "checkpoint_policy"]], proc.stderr)
        for w in warnings:  # each says what cairn does instead
            self.assertRegex(w, r"setting, ignored: \S")
        shown = self.cairn_json("show", "1", "--json")
        self.assertEqual(shown["seed"], 4242)  # reproducibility.experiment_seed
        # Determined's defaults for what the config does not write, recorded and stated.
        config = shown["config"]
        self.assertEqual(config["searcher"]["divisor"], 4)
        self.assertEqual(config["searcher"]["max_concurrent_trials"], 16)
        self.assertEqual(config["max_restarts"], 5)
        self.assertEqual(config["determined_defaults"]["because"], "data")
        text = self.cairn("show", "1", check=0).stdout
        self.assertIn("defaults    Determined's, for its key data: searcher.divisor 4, "
                      "searcher.max_concurrent_trials 16, max_restarts 5, "
                      "log_policies [CUDA OOM]\n", text)
        # async_halving is one bracket of num_rungs rungs: with divisor 4, lengths 4 and 16
        # (adaptive_asha's standard mode would have made two brackets).
        brackets = shown["searcher_state"]["brackets"]
        self.assertEqual(len(brackets), 1, brackets)
        self.assertEqual([r["length"] for r in brackets[0]["rungs"]], [4, 16])
        # Every trial's script read the data map as Determined gives it.
        seen = self.seen()
        self.assertEqual(len({s["trial_id"] for s in seen}), 4)
        for s in seen:
            self.assertEqual(s["user_data"], {"url": "s3://bucket/mnist", "batch_size": 64,
                                              "splits": ["train", "val"]})
        self.assertTrue(any(t["state"] == "COMPLETED" for t in shown["trials"]), shown["trials"])

    def test_bracket_rungs_and_stop_once_shape_adaptive_asha(self):
        # The first trial is the worst at every rung: ASHA's usual rule would never promote
        # it; stop_once promotes whoever arrives first at a rung (the best of one), so with
        # one trial at a time it trains to max_length.
        self.write("train.py", OPERATIONS.replace(
            'metric = info.trial.hparams["x"] / steps', "metric = 100.0 - info.trial.trial_id"))
        config = """entrypoint: /usr/bin/python3 train.py
hyperparameters:
  x: {type: double, minval: 0.5, maxval: 2.0}
searcher:
  name: adaptive_asha
  metric: val_loss
  max_length: 16
  max_trials: 6
  max_rungs: 3
  divisor: 2
  max_concurrent_trials: 1
  bracket_rungs: [3, 1]
  stop_once: %s
"""
        for n, stop_once in ((1, "true"), (2, "false")):
            self.write("det.yaml", config % stop_once)
            proc = self.run_config("det.yaml")
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            shown = self.cairn_json("show", str(n), "--json")
            # Two brackets of 3 and 1 rungs (mode standard alone would give 3 and 2).
            brackets = shown["searcher_state"]["brackets"]
            self.assertEqual([[r["length"] for r in b["rungs"]] for b in brackets],
                             [[4, 8, 16], [16]], brackets)
            first = self.cairn_json("show", "%d.1" % n, "--json")
            expected = ("COMPLETED", 16) if stop_once == "true" else ("STOPPED", 4)
            self.assertEqual((first["state"], first["steps_completed"]), expected, first)

    def test_log_policies_cancel_the_restarts_of_a_trial_whose_output_matched(self):
        # Each trial reports (so the repeated-failure rule says nothing), prints its line,
        # then one more, and exits 1.
        self.write("train.py", r'''
import os, sys
import determined as det
with det.core.init() as core_context:
    core_context.train.report_training_metrics(1, {"loss": 1.0})
    print(det.get_cluster_info().trial.hparams["say"], flush=True)
    print("exiting after attempt %s" % os.getpid(), flush=True)
    sys.exit(1)
''')
        self.write("det.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters:
  say:
    type: categorical
    vals: ["reading bad shard 7 of 9", "torch.OutOfMemoryError: CUDA out of memory.", "fine"]
searcher: {name: grid, metric: val_loss, max_length: 4}
max_restarts: 2
log_policies:
  - name: Bad shard
    pattern: ".*bad shard [0-9]+.*"
    action: cancel_retries
  - pattern: ".*uncorrectable ECC error encountered.*"
    action:
      type: exclude_node
""")
        proc = self.run_config("det.yaml")
        out = proc.stdout + proc.stderr
        by_say = {t["hparams"]["say"]: t for t in self.trials()}
        self.assertEqual(len(by_say), 3, by_say)
        for say, restarts in (("reading bad shard 7 of 9", 0),
                              ("torch.OutOfMemoryError: CUDA out of memory.", 0),  # default
                              ("fine", 2)):
            trial = by_say[say]
            self.assertEqual(trial["state"], "ERROR", trial)
            self.assertEqual(trial["restarts"], restarts, (say, trial))
        self.assertIn("not restarted: a line of its output matched log policy 'Bad shard'", out)
        # The store says why too (`cairn show TRIAL`).
        self.assertEqual(by_say["reading bad shard 7 of 9"]["error"],
                         "exited with status 1; not restarted: a line of its output matched log "
                         "policy 'Bad shard' (cancel_retries)")
        self.assertEqual(by_say["fine"]["error"], "exited with status 1")
        self.assertIn("not restarted: a line of its output matched log policy 'CUDA OOM'", out)
        self.assertIn("det.yaml:13: log_policies[1].action: exclude_node", out)

    def test_a_syntax_error_is_not_retried_once_it_repeats_itself(self):
        self.write("train.py", "import determined as det\ndef broken(:\n    pass\n")
        self.write("det.yaml", """entrypoint: /usr/bin/python3 train.py
searcher: {name: single, metric: val_loss, max_length: 4}
bind_mounts: []
""")
        proc = self.run_config("det.yaml")
        out = proc.stdout + proc.stderr
        trial = self.cairn_json("show", "1.1", "--json")
        # Determined's max_restarts default (5) would allow five; the second identical
        # failure ends it: two attempts, one restart, counted in the store.
        self.assertEqual(self.cairn_json("show", "1", "--json")["config"]["max_restarts"], 5)
        self.assertEqual(trial["state"], "ERROR", trial)
        self.assertEqual(trial["restarts"], 1, out)
        self.assertIn("failed twice in a row with the same last line", out)
        self.assertIn("not restarted: it failed twice in a row", trial["error"])
        self.assertEqual(out.count("[1.1] SyntaxError: invalid syntax"), 2, out)  # two attempts

        # retry_repeated_failures: true restarts it up to max_restarts as any failure.
        self.write("retry.yaml", """entrypoint: /usr/bin/python3 train.py
searcher: {name: single, metric: val_loss, max_length: 4}
max_restarts: 2
retry_repeated_failures: true
""")
        self.run_config("retry.yaml")
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["restarts"], 2)

        # A last line that changes is a new failure each time: restarted to max_restarts.
        self.write("flaky.py", r'''
import os, sys
path = os.path.join(os.environ["CAIRN_WORKDIR"], "attempts")
n = len(open(path).read()) if os.path.exists(path) else 0
open(path, "a").write("x")
sys.exit("failure number %d" % n)
''')
        self.write("flaky.yaml", """entrypoint: /usr/bin/python3 flaky.py
searcher: {name: single, metric: val_loss, max_length: 4}
max_restarts: 2
""")
        self.run_config("flaky.yaml")
        self.assertEqual(self.cairn_json("show", "3.1", "--json")["restarts"], 2)


if __name__ == "__main__":
    cairn_testlib.main()
