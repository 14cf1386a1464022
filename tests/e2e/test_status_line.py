"""End to end: the live status line of `cairn run` on a real pseudo-terminal
(engine/coordinator/terminal.h): kept below the trials' output, redrawn a few times a second,
fitted to the terminal's width and its changes, showing a silent trial; gone when the run
ends; and never in piped output."""
import fcntl
import os
import re
import signal
import struct
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

# Trial 1.1 prints, validates, then goes silent until the test writes `release`; 1.2 runs
# after it (one at a time) straight through.
TRAIN = r'''
import os, time
import cairn
ctx = cairn.init()
release = os.path.join(os.environ["CAIRN_WORKDIR"], "release")
for op in ctx.operations():
    print("hello from", ctx.trial_id, flush=True)
    ctx.report_validation(1, {"val_loss": 1.0 / ctx.hparams["x"]})
    deadline = time.time() + 120
    while ctx.trial_id.endswith(".1") and not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.05)
    ctx.report_validation(op.length, {"val_loss": 0.5 / ctx.hparams["x"]})
'''

CONFIG = '''name: live
entrypoint: [/usr/bin/python3, train.py]
hyperparameters:
  x: {type: categorical, vals: [1, 2]}
searcher: {name: grid, metric: val_loss, max_length: 2, max_concurrent_trials: 1}
'''

CLEAR = "\r\x1b[K"
# What follows CLEAR when the line drawn before takes several rows at the terminal's width
# now (it shrank, and the terminal reflowed the line): up to its first row, clear below.
WRAPPED_CLEAR = r"^\x1b\[(\d+)A\x1b\[J"


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def status_lines(text):
    """Every status line drawn: what follows a clear and the last line break before the
    next clear (trial output and notes end with one; the status line has none)."""
    out = []
    for segment in text.split(CLEAR)[1:]:
        segment = re.sub(WRAPPED_CLEAR, "", segment)
        tail = segment.rsplit("\r\n", 1)[-1]
        if tail:
            out.append(tail)
    return out


class StatusLineTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)

    def test_the_status_line_stays_below_the_output_and_follows_the_terminal(self):
        env = self.cairn_env({"CAIRN_TEST_SILENCE_AFTER": "1", "COLUMNS": None})
        run = self.on_pty([CAIRN, "run", "exp.yaml"], env=env)
        set_size(run.master, 30, 120)
        start = time.monotonic()
        # Trial 1.1 runs (the grid makes 1.2 when a slot frees): the counts of the grid's 2
        # trials, its 4 units, 1.1's first validation the best so far.
        run.read_until(lambda t: any(re.match(r"trials 0/2 done, 1 running \| units 1/4 \| best "
                                              r"val_loss 1 \(1\.1\) \| \d+s, ~\d+[ms]", s)
                                     for s in status_lines(t)), what="the first counts")
        # Its output scrolled above the line: whole, after a clear, then the line again.
        self.assertRegex(run.text, re.escape(CLEAR + "[1.1] hello from 1.1\r\n") + "trials ")
        # 1.1 says nothing now: its silence shows.
        run.read_until(lambda t: any(re.search(r"\| 1\.1 silent [1-9]\d*s$", s)
                                     for s in status_lines(t)), what="the silence shown")
        # A narrower terminal: the next lines fit it.
        drawn = len(status_lines(run.text))
        set_size(run.master, 30, 40)
        # What the terminal sends its foreground process (this pty is no controlling
        # terminal of cairn's session, so the test sends it): redrawn at once, still running.
        os.kill(run.proc.pid, signal.SIGWINCH)
        run.read_until(lambda t: len(status_lines(t)) > drawn + 2, what="redraws after resize")
        narrow = status_lines(run.text)[drawn + 1:]
        self.assertTrue(all(len(s) <= 39 for s in narrow), narrow)
        self.assertTrue(all(s.startswith("trials 0/2 1R | ") for s in narrow), narrow)
        self.assertTrue(all(len(s) <= 119 for s in status_lines(run.text)[:drawn]))
        open(os.path.join(self.dir, "release"), "w").close()
        self.assertEqual(run.read_to_end(timeout=120), 0, run.text)
        elapsed = time.monotonic() - start
        text = run.text
        # At most a few redraws a second (4, and one with each line of output).
        lines = text.count("\r\n")
        self.assertLessEqual(len(status_lines(text)), 4 * elapsed + lines + 4)
        # The run's last words are plain lines: the line was cleared for good before them.
        summary = "cairn: experiment 1 COMPLETED: 2 of 2 trials completed"
        self.assertIn(summary, text)
        self.assertNotIn(CLEAR, text[text.index(summary):])
        self.assertTrue(text.endswith("\r\n"), repr(text[-200:]))
        # No colour with NO_COLOR (CairnTestCase's default), though the line is there.
        self.assertIsNone(re.search(r"\x1b\[[0-9;]*m", text))

    def test_a_shrink_clears_every_row_the_reflowed_line_takes(self):
        env = self.cairn_env({"COLUMNS": None})
        run = self.on_pty([CAIRN, "run", "exp.yaml"], env=env)
        set_size(run.master, 30, 120)
        run.read_until(lambda t: any(len(s) > 60 for s in status_lines(t)),
                       what="a status line longer than 60 columns")
        mark = len(run.text)
        set_size(run.master, 30, 25)
        os.kill(run.proc.pid, signal.SIGWINCH)
        wrapped = re.compile(re.escape(CLEAR) + WRAPPED_CLEAR[1:])
        run.read_until(lambda t: wrapped.search(t, mark), what="the reflowed rows cleared")
        text = run.text
        m = wrapped.search(text, mark)
        # The line drawn last before it, at 120 columns, takes ceil(n / 25) rows at 25: the
        # clear goes up all but the cursor's row, then clears to the end of the screen.
        before = status_lines(text[:m.start()])[-1]
        self.assertGreater(len(before), 25)
        self.assertEqual(int(m.group(1)), -(-len(before) // 25) - 1, repr(before))
        # Once the line fits, a plain clear again: each row it took is cleared exactly once.
        run.read_until(lambda t: len(status_lines(t[m.end():])) >= 3, what="later redraws")
        after = run.text[m.end():]
        self.assertIsNone(wrapped.search(after), repr(after[:300]))
        self.assertTrue(all(len(s) <= 24 for s in status_lines(run.text[m.start():])))
        open(os.path.join(self.dir, "release"), "w").close()
        self.assertEqual(run.read_to_end(timeout=120), 0, run.text)

    def test_piped_output_has_no_status_line_nor_any_control_character(self):
        open(os.path.join(self.dir, "release"), "w").close()
        proc = self.cairn("run", "exp.yaml", check=0, env={"NO_COLOR": None})
        self.assertIn("[1.1] hello from 1.1\n", proc.stdout)
        self.assertNotIn("trials 0/2", proc.stdout)
        self.assertIsNone(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", proc.stdout + proc.stderr))

    def test_a_dumb_terminal_gets_plain_lines(self):
        open(os.path.join(self.dir, "release"), "w").close()
        run = self.on_pty([CAIRN, "run", "exp.yaml"], env=self.cairn_env({"TERM": "dumb"}))
        self.assertEqual(run.read_to_end(timeout=120), 0, run.text)
        self.assertNotIn("\x1b", run.text)
        self.assertIn("[1.2] hello from 1.2\r\n", run.text)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
