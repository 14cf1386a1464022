"""End to end: `notify.webhook` POSTs to a real HTTP server on loopback, from a real `cairn run`
(docs/config.md, "Notifications"): what is sent, retries, signatures, and that a receiver that
fails, is down or hangs never breaks or holds up the run beyond its bounded wait."""
import hashlib
import hmac
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402

# x=1 fails at once (and is not restarted: max_restarts 0); x=2 and x=3 validate and complete.
TRAIN = r'''
import cairn
ctx = cairn.init()
if ctx.hparams["x"] == 1:
    raise SystemExit(5)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0 / ctx.hparams["x"]})
'''

# Trial 1.1 validates and completes; every later one says it runs (waiting-<id>) and waits for
# `release` before it validates.
SLOW_AFTER_FIRST = r'''
import os, time
import cairn
ctx = cairn.init()
for op in ctx.operations():
    if not ctx.trial_id.endswith(".1"):
        open(os.path.join(os.environ["CAIRN_WORKDIR"], "waiting-" + ctx.trial_id), "w").close()
        release = os.path.join(os.environ["CAIRN_WORKDIR"], "release")
        deadline = time.time() + 120
        while not os.path.exists(release) and time.time() < deadline:
            if ctx.should_preempt():
                raise SystemExit(0)  # paused before its validation: it runs again on resume
            time.sleep(0.05)
    ctx.report_validation(op.length, {"val_loss": 1.0 / ctx.hparams["x"]})
'''

CONFIG = '''name: hooked
entrypoint: [/usr/bin/python3, train.py]
hyperparameters:
  x: {type: categorical, vals: [1, 2, 3]}
searcher: {name: grid, metric: val_loss, max_length: 1, max_concurrent_trials: 1}
max_restarts: 0
notify:
%s
'''

SECRET_PATH = "/services/T000/B000/sekrit-token"


class Recorder:
    """An HTTP server on loopback that records each POST and answers as told: `fail_first`
    requests get a 500, and with `hang` set every request is held for that many seconds."""

    def __init__(self, fail_first=0, hang=0.0, port=0):
        self.requests = []
        self.fail_first = fail_first
        self.hang = hang
        self.lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with recorder.lock:
                    recorder.requests.append((self.path, dict(self.headers), body))
                    n = len(recorder.requests)
                deadline = time.monotonic() + recorder.hang
                while time.monotonic() < deadline and recorder.hang:  # hang = 0 lets it go
                    time.sleep(0.05)
                code = 500 if n <= recorder.fail_first else 200
                try:
                    self.send_response(code)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # cairn gave up on this request (timed out, or was killed)
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d%s" % (self.server.server_address[1], SECRET_PATH)

    def bodies(self):
        with self.lock:
            return [json.loads(body) for _, _, body in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class WebhookTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)

    def serve(self, **kw):
        rec = Recorder(**kw)
        self.addCleanup(rec.close)
        return rec

    def test_end_and_trial_error_are_posted_signed_and_retried(self):
        rec = self.serve(fail_first=2)  # the first delivery is retried twice before it lands
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  secret_env: HOOK_SECRET' % rec.url))
        start = time.monotonic()
        proc = self.cairn("run", "exp.yaml", check=0, env={"HOOK_SECRET": "s3cr3t"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertLess(time.monotonic() - start, 60)
        bodies = rec.bodies()
        events = [b["event"] for b in bodies]
        # trial_error three times (two 500s, then delivered), then the end.
        self.assertEqual(events, ["trial_error"] * 3 + ["experiment_end"], bodies)
        self.assertEqual(len({b["delivery_id"] for b in bodies[:3]}), 1, "one id across retries")
        err, end = bodies[2], bodies[3]
        self.assertEqual(err["trial"]["id"], "1.1")
        self.assertIn("5", err["trial"]["error"])
        self.assertIn("cairn: trial 1.1 of experiment 1 'hooked'", err["text"])
        self.assertEqual(end["experiment"], {"id": 1, "name": "hooked", "state": "COMPLETED"})
        self.assertEqual(end["trials"], {"total": 3, "completed": 2, "errored": 1})
        self.assertEqual(end["best"], {"trial": "1.3", "metric": "val_loss", "value": 1.0 / 3})
        self.assertEqual(end["hint"], "cairn show 1")
        self.assertEqual(end["host"], socket.gethostname())
        self.assertTrue(end["text"].startswith("cairn: experiment 1 'hooked' COMPLETED"), end)
        for path, headers, body in rec.requests:
            self.assertEqual(path, SECRET_PATH)
            self.assertEqual(headers["Content-Type"], "application/json")
            self.assertEqual(headers["X-Cairn-Delivery"], json.loads(body)["delivery_id"])
            ts = headers["X-Cairn-Timestamp"]
            want = hmac.new(b"s3cr3t", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
            self.assertEqual(headers["X-Cairn-Signature"], "v1=" + want)
        self.assertNotIn("webhook", proc.stderr)  # delivered in the end: nothing to say
        # The URL is a secret: what cairn prints of the stored config leaves its path out.
        shown = self.cairn("show", "1", "--json", check=0).stdout
        self.assertEqual(json.loads(shown)["config"]["notify"]["webhook"],
                         "http://127.0.0.1:%d/…" % rec.server.server_address[1])
        self.assertNotIn("sekrit", shown + self.cairn("compare", "1.2", "1.3", check=0).stdout)

    def test_a_receiver_that_is_down_is_one_line_and_the_run_goes_on(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()  # nothing listens there now: connections are refused
        url = "http://127.0.0.1:%d%s" % (port, SECRET_PATH)
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [end]' % url))
        start = time.monotonic()
        proc = self.cairn("run", "exp.yaml", check=0)
        elapsed = time.monotonic() - start
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        lines = [ln for ln in proc.stderr.splitlines() if "webhook" in ln]
        self.assertEqual(lines, ["cairn: warning: webhook experiment_end to http://127.0.0.1:%d/… "
                                 "not delivered: Couldn't connect to server (4 tries); kept for "
                                 "the next resume" % port],
                         proc.stderr)
        self.assertNotIn("sekrit", proc.stdout + proc.stderr)
        # Back-off 1 + 2 + 4 s after the run: bounded well below the 15 s drain limit.
        self.assertLess(elapsed, 30)

    def test_a_hanging_receiver_holds_neither_trials_nor_the_exit_for_long(self):
        rec = self.serve(hang=120)
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"' % rec.url))
        start = time.monotonic()
        proc = self.cairn("run", "exp.yaml", check=0)
        elapsed = time.monotonic() - start
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # The trial_error delivery hung from the first trial on; trials 1.2 and 1.3 ran anyway.
        self.assertIn("experiment 1 COMPLETED: 2 of 3 trials completed", proc.stdout)
        self.assertGreaterEqual(len(rec.requests), 1)
        self.assertIn("cairn: warning: webhook: 2 notification(s) not delivered before cairn "
                      "ended", proc.stderr)
        self.assertNotIn("sekrit", proc.stdout + proc.stderr)
        self.assertLess(elapsed, 45)  # the 15 s drain limit, not the receiver's 120 s

    def test_best_improved_is_posted_at_most_once_a_minute(self):
        rec = self.serve()
        self.write("exp.yaml", CONFIG.replace("vals: [1, 2, 3]", "vals: [2, 3]") %
                   ('  webhook: "%s"\n  on: [best_improved]' % rec.url))
        proc = self.cairn("run", "exp.yaml", check=0)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # 1.1's 0.5 at once; 1.2's better 1/3 came within the minute: it waited, and the run
        # ended first (the end event, not asked for here, would have named it).
        self.assertEqual([(b["event"], b["best"]) for b in rec.bodies()],
                         [("best_improved", {"trial": "1.1", "metric": "val_loss", "value": 0.5})])
        self.assertEqual(rec.bodies()[0]["text"],
                         "cairn: experiment 1 'hooked': new best trial 1.1 (val_loss 0.5)")

    def free_port(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        return port

    def spool(self):
        d = os.path.join(self.dir, ".cairn", "experiments", "1", "notify")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def test_an_undelivered_end_is_kept_and_resume_delivers_it(self):
        port = self.free_port()
        url = "http://127.0.0.1:%d%s" % (port, SECRET_PATH)
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [end]' % url))
        proc = self.cairn("run", "exp.yaml", check=0)
        self.assertIn("not delivered: Couldn't connect to server (4 tries); kept for the next "
                      "resume", proc.stderr)
        kept = self.spool()
        self.assertEqual(len(kept), 1, kept)
        rec = self.serve(port=port)  # the receiver is back
        proc = self.cairn("resume", "1", check=0)
        self.assertIn("cairn: experiment 1 is COMPLETED; nothing to resume", proc.stdout)
        self.assertIn("cairn: delivering 1 notification(s) an earlier cairn left undelivered",
                      proc.stderr)
        bodies = rec.bodies()
        self.assertEqual([b["event"] for b in bodies], ["experiment_end"])
        self.assertEqual(bodies[0]["delivery_id"] + ".pending", kept[0])
        self.assertEqual(bodies[0]["experiment"]["state"], "COMPLETED")
        self.assertEqual(self.spool(), [])
        self.cairn("resume", "1", check=0)  # nothing pending: nothing sent again
        self.assertEqual(len(rec.requests), 1)

    def test_a_kill_9_before_delivery_still_delivers_at_least_once(self):
        rec = self.serve(hang=300)
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [end]' % rec.url))
        run = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir, env=self.cairn_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        wait_until(lambda: len(rec.requests) == 1, timeout=120, what="the end being posted")
        run.kill()  # SIGKILL while the receiver holds the POST
        run.wait(timeout=30)
        self.assertEqual(len(self.spool()), 1)
        rec.hang = 0
        proc = self.cairn("resume", "--all", check=0)
        self.assertIn("resumed 0 interrupted experiment(s)", proc.stderr)
        self.assertIn("delivering the undelivered notifications of 1 ended experiment(s)",
                      proc.stderr)
        wait_until(lambda: len(rec.requests) >= 2 and not self.spool(), timeout=60,
                   what="the end delivered again by resume --all")
        first, again = rec.bodies()[:2]
        self.assertEqual(first, again)  # the same delivery id: the receiver can drop it
        self.assertEqual(first["experiment"]["state"], "COMPLETED")

    def spool_files(self, extension):
        return [f for f in self.spool() if f.endswith(extension)]

    def test_a_kill_9_between_the_end_stored_and_its_delivery_still_delivers(self):
        # The end's marker rides the commit that stores COMPLETED; the process dies right after
        # that commit, before anything was handed to the sender's thread.
        rec = self.serve()
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [end]' % rec.url))
        proc = self.cairn("run", "exp.yaml", env={"CAIRN_TEST_DIE_AFTER_NOTIFY_COMMIT": "1"})
        self.assertEqual(proc.returncode, 137, proc.stderr)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        self.assertEqual(rec.requests, [])
        pending = self.spool_files(".pending")
        self.assertEqual(len(pending), 1, self.spool())
        proc = self.cairn("resume", "1", check=0)
        self.assertIn("cairn: experiment 1 is COMPLETED; nothing to resume", proc.stdout)
        self.assertIn("cairn: delivering 1 notification(s) an earlier cairn left undelivered",
                      proc.stderr)
        bodies = rec.bodies()
        self.assertEqual([b["event"] for b in bodies], ["experiment_end"], bodies)
        self.assertEqual(bodies[0]["delivery_id"] + ".pending", pending[0])
        self.assertEqual(rec.requests[0][1]["X-Cairn-Delivery"], bodies[0]["delivery_id"])
        self.assertEqual(bodies[0]["experiment"]["state"], "COMPLETED")
        self.assertEqual(self.spool(), [])
        self.cairn("resume", "1", check=0)
        self.assertEqual(len(rec.requests), 1)

    def test_a_kill_9_between_a_trial_error_stored_and_its_delivery_still_delivers(self):
        rec = self.serve()
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [trial_error]' % rec.url))
        proc = self.cairn("run", "exp.yaml", env={"CAIRN_TEST_DIE_AFTER_NOTIFY_COMMIT": "1"})
        self.assertEqual(proc.returncode, 137, proc.stderr)
        self.assertEqual(rec.requests, [])
        pending = self.spool_files(".pending")
        self.assertEqual(len(pending), 1, self.spool())
        trials = {t["id"]: t["state"] for t in self.cairn_json("show", "1", "--json")["trials"]}
        self.assertEqual(trials["1.1"], "ERROR", trials)
        proc = self.cairn("resume", "1", check=0)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("experiment 1 COMPLETED: 2 of 3 trials completed", proc.stdout)
        bodies = rec.bodies()
        # Delivered once, with the id it was given before the kill; 1.1 did not run again.
        self.assertEqual([(b["event"], b["trial"]["id"]) for b in bodies], [("trial_error", "1.1")])
        self.assertEqual(bodies[0]["delivery_id"] + ".pending", pending[0])
        self.assertEqual(self.spool(), [])

    def test_a_kill_9_before_the_trial_error_is_stored_sends_it_once_when_it_happens(self):
        # The event is pending, its marker and the trial's ERROR not committed: the resume
        # drops it, runs 1.1 again, and the failure it meets again is notified then.
        rec = self.serve()
        self.write("exp.yaml", CONFIG % ('  webhook: "%s"\n  on: [trial_error]' % rec.url))
        proc = self.cairn("run", "exp.yaml", env={"CAIRN_TEST_DIE_BEFORE_NOTIFY_COMMIT": "1"})
        self.assertEqual(proc.returncode, 137, proc.stderr)
        pending = self.spool_files(".pending")
        self.assertEqual(len(pending), 1, self.spool())
        trials = {t["id"]: t["state"] for t in self.cairn_json("show", "1", "--json")["trials"]}
        self.assertNotEqual(trials["1.1"], "ERROR", trials)
        proc = self.cairn("resume", "1", check=0)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("1 notification(s) of a change an earlier cairn did not store were "
                      "dropped", proc.stderr)
        bodies = rec.bodies()
        self.assertEqual([(b["event"], b["trial"]["id"]) for b in bodies], [("trial_error", "1.1")])
        self.assertNotEqual(bodies[0]["delivery_id"] + ".pending", pending[0])
        self.assertEqual(self.spool(), [])

    def test_best_improved_keeps_its_best_and_its_pace_across_a_kill_and_resume(self):
        # 1.1 (0.5) is the first best: posted. cairn dies right after storing it; the resume
        # delivers it, and then 1.1 run again (0.5: no better), 1.2 (1.0: worse) send
        # nothing, and 1.3's better 1/3 comes within the minute of 1.1's: it waits, and the
        # experiment ends first. A resume that forgot would post 0.5 again, or 1.0.
        rec = self.serve()
        self.write("exp.yaml", CONFIG.replace("vals: [1, 2, 3]", "vals: [2, 1, 3]").replace(
            "max_restarts: 0", "max_restarts: 1") %
            ('  webhook: "%s"\n  on: [best_improved]' % rec.url))
        self.write("train.py", TRAIN.replace('if ctx.hparams["x"] == 1:\n    raise SystemExit(5)\n',
                                             ""))
        proc = self.cairn("run", "exp.yaml", env={"CAIRN_TEST_DIE_AFTER_NOTIFY_COMMIT": "1"})
        self.assertEqual(proc.returncode, 137, proc.stderr)
        self.assertEqual(rec.requests, [])
        proc = self.cairn("resume", "1", check=0)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("experiment 1 COMPLETED: 3 of 3 trials completed", proc.stdout)
        self.assertEqual([(b["event"], b["best"]) for b in rec.bodies()],
                         [("best_improved", {"trial": "1.1", "metric": "val_loss", "value": 0.5})])
        self.assertEqual(self.spool(), [])

    def test_best_improved_after_a_pause_sends_neither_an_old_best_nor_early(self):
        # 1.1 (0.5) is posted; the experiment is paused while 1.2 waits for `release`; the
        # resume's 1.2 (1.0) is no better than 0.5, and 1.3's 1/3 comes within the interval
        # (made 10 minutes here, so that the test's pace cannot matter).
        rec = self.serve()
        slow = {"CAIRN_TEST_BEST_INTERVAL_MS": "600000"}
        self.write("exp.yaml", CONFIG.replace("vals: [1, 2, 3]", "vals: [2, 1, 3]") %
                   ('  webhook: "%s"\n  on: [best_improved]' % rec.url))
        self.write("train.py", SLOW_AFTER_FIRST)
        run = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir,
                               env=self.cairn_env(slow), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        wait_until(lambda: len(rec.requests) == 1, timeout=120, what="1.1's best posted")
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "waiting-1.2")), timeout=120,
                   what="1.2 running")
        self.cairn("pause", "1", check=0)
        self.assertEqual(run.wait(timeout=120), 0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        open(os.path.join(self.dir, "release"), "w").close()
        proc = self.cairn("resume", "1", check=0, env=slow)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("experiment 1 COMPLETED: 3 of 3 trials completed", proc.stdout)
        self.assertEqual([(b["event"], b["best"]) for b in rec.bodies()],
                         [("best_improved", {"trial": "1.1", "metric": "val_loss", "value": 0.5})])

    def test_webhook_env_names_the_url(self):
        rec = self.serve()
        self.write("exp.yaml", CONFIG % '  webhook_env: MY_HOOK\n  on: [end]')
        proc = self.cairn("run", "exp.yaml", check=0, env={"MY_HOOK": rec.url})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        wait_until(lambda: len(rec.requests) >= 1, timeout=30, what="the end posted")
        self.assertEqual([b["event"] for b in rec.bodies()], ["experiment_end"])
        # Without the variable, the run says so once and sends nothing.
        proc = self.cairn("run", "exp.yaml", check=0, env={"MY_HOOK": None})
        self.assertIn("cairn: warning: notify.webhook_env: MY_HOOK is not set; no notification "
                      "goes to it", proc.stderr)
        self.assertEqual(len(rec.requests), 1)


if __name__ == "__main__":
    unittest.main()
