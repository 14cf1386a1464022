"""End to end: `cairn report EXP... -o FILE.html` on real searches over builtin:mlp: one
self-contained page whose charts and table hold every trial, written whole; bad ids and
outputs are bad input; and the page opened in a real headless browser (Debian's chromium,
installed by `./install.sh --test`): it loads with no console message, the screenshot is not
blank, and the rendered DOM holds the expected curves, points and lines."""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

CONFIG = """entrypoint: builtin:mlp
hyperparameters:
  lr: {type: log, minval: -3, maxval: -1, base: 10}
  optimizer: {type: categorical, vals: [sgd, adam]}
  hidden: 16
  samples: 300
searcher: {name: random, metric: val_loss, max_length: 3, max_trials: 4}
checkpoint: {period: 1}
reproducibility: {seed: 11}
"""
SVG = "{http://www.w3.org/2000/svg}"


class ReportTest(CairnTestCase):
    def test_report_holds_every_trial_in_charts_and_table(self):
        self.write("exp.yaml", CONFIG)
        # A name that would be markup: the page must show it, not run it.
        self.cairn("run", "exp.yaml", "--name", "<script>alert(1)</script>", check=0)
        out = self.cairn("report", "1", "-o", "out/../report.html", check=None)
        self.assertEqual(out.returncode, 2, "out/ does not exist: " + out.stderr)
        self.assertEqual(out.stderr, "cairn: error: -o out/../report.html: there is no "
                         "directory out/..\n")
        self.cairn("report", "1", "-o", "report.html", check=0)
        with open(os.path.join(self.dir, "report.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertNotIn("<script", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", page)
        # Self-contained: nothing is fetched from elsewhere.
        self.assertIsNone(re.search(r"\b(src|href)\s*=", page), "no external resources")

        trials = self.cairn_json("show", "1", "--json")["trials"]
        self.assertEqual(len(trials), 4)
        charts = {}
        for text in re.findall(r"<svg.*?</svg>", page, re.S):
            svg = ET.fromstring(text)  # well-formed XML, or this raises
            charts[svg.get("aria-label")] = svg
        curves = charts["val_loss at each validation"]
        best = self.cairn("best", "1", check=0).stdout.strip()
        # One series per trial, named in its tooltip, with a line through its 3 validations
        # and a point at each that names the trial and step; the best one marked.
        series = curves.findall(SVG + "g")
        self.assertEqual(sorted(g.find(SVG + "title").text for g in series),
                         sorted("trial " + t["id"] + (" (best)" if t["id"] == best else "")
                                for t in trials))
        for g in series:
            self.assertEqual(len(g.find(SVG + "polyline").get("points").split()), 3)
            tips = [c.find(SVG + "title").text for c in g.findall(SVG + "circle")]
            self.assertEqual([t.split(":")[0] for t in tips],
                             ["trial %s, step %d" % (g.get("data-trial"), s) for s in (1, 2, 3)])
        self.assertEqual([g.get("data-trial") for g in series if "best" in g.get("class")], [best])
        self.assertIn("★ best " + best, ET.tostring(curves, encoding="unicode"))
        # Axes have titles and more than their two end values.
        titles = [t.text for t in curves.iter(SVG + "text") if t.get("class") == "axis-title"]
        self.assertEqual(titles[0], "step (units trained)")
        self.assertGreaterEqual(len([t for t in curves.iter(SVG + "text")
                                     if t.get("class") == "tick"]), 6)
        self.assertIn("training loss", charts)
        # The hyperparameters that vary get a plot; the constant ones do not.
        self.assertIn("val_loss vs lr", charts)
        self.assertIn("val_loss vs optimizer", charts)
        self.assertNotIn("val_loss vs hidden", charts)
        points = charts["val_loss vs lr"].findall(SVG + "circle")
        self.assertEqual(len(points), 4)
        # lr is a `log` hyperparameter: a log axis, its ticks powers of ten.
        lr = charts["val_loss vs lr"]
        self.assertIn("lr (log scale)", [t.text for t in lr.iter(SVG + "text")])
        ticks = [t.text for t in lr.iter(SVG + "text") if t.get("class") == "tick"]
        self.assertIn("0.01", ticks)
        self.assertIn("0.1", ticks)
        self.assertEqual(sorted(c.find(SVG + "title").text.split(":")[0] for c in points),
                         sorted("trial " + t["id"] + (" (best)" if t["id"] == best else "")
                                for t in trials))
        lines = charts["parallel coordinates: hyperparameters and val_loss"].findall(
            SVG + "polyline")
        self.assertEqual(sorted(p.get("data-trial") for p in lines), sorted(t["id"] for t in trials))
        self.assertIn("Method: η² (correlation ratio)", page)
        self.assertEqual(len(re.findall(r'aria-label="importance of (lr|optimizer)"', page)), 2)

        rows = re.findall(r"<tr(?: class=\"best\")?><td>([^<]*)</td>", page)
        self.assertEqual(sorted(rows), sorted(t["id"] for t in trials))
        self.assertIn('<tr class="best"><td>%s</td>' % best, page)

    def test_several_experiments_share_axes_and_asha_shows_its_rungs(self):
        self.write("exp.yaml", CONFIG)
        self.cairn("run", "exp.yaml", check=0)
        self.write("asha.yaml", CONFIG.replace(
            "searcher: {name: random, metric: val_loss, max_length: 3, max_trials: 4}",
            "searcher: {name: asha, metric: val_loss, max_length: 9, max_trials: 6, "
            "max_rungs: 3, max_concurrent_trials: 2}"))
        self.cairn("run", "asha.yaml", check=0)
        self.cairn("report", "1", "2", "-o", "both.html", check=0)
        with open(os.path.join(self.dir, "both.html"), encoding="utf-8") as f:
            page = f.read()
        charts = {}
        for text in re.findall(r"<svg.*?</svg>", page, re.S):
            svg = ET.fromstring(text)
            charts[svg.get("aria-label")] = svg
        ids = sorted(t["id"] for e in ("1", "2") for t in self.cairn_json("show", e, "--json")["trials"])
        curves = charts["val_loss at each validation"].findall(SVG + "g")
        self.assertEqual(sorted(g.get("data-trial") for g in curves), ids)
        self.assertEqual(len([g for g in curves if "best" in g.get("class")]), 2)  # one each
        rungs = charts["experiment 2: brackets and rungs (who was promoted where)"]
        dots = rungs.findall(".//" + SVG + "circle")
        self.assertTrue(dots)
        for d in dots:
            self.assertRegex(d.find(SVG + "title").text, r"^trial 2\.\d+, bracket \d+, rung @\d+: ")
        self.assertNotIn("experiment 1: brackets and rungs (who was promoted where)", charts)
        proc = self.cairn("report", "1", "1", "-o", "x.html", check=2)
        self.assertIn("experiment 1 is named twice", proc.stderr)

    def test_pbt_lineage_shows_each_clones_parent_and_step(self):
        self.write("pbt.yaml", CONFIG.replace(
            "searcher: {name: random, metric: val_loss, max_length: 3, max_trials: 4}",
            "searcher: {name: pbt, metric: val_loss, max_length: 6, population_size: 4, "
            "perturbation_interval: 2}"))
        self.cairn("run", "pbt.yaml", check=0, timeout=300)
        self.cairn("report", "1", "-o", "pbt.html", check=0)
        with open(os.path.join(self.dir, "pbt.html"), encoding="utf-8") as f:
            page = f.read()
        trials = {t["id"]: t for t in self.cairn_json("show", "1", "--json")["trials"]}
        clones = {i: t for i, t in trials.items() if t.get("parent")}
        self.assertEqual(len(clones), 2, "one replaced at each of steps 2 and 4")
        charts = {}
        for text in re.findall(r"<svg.*?</svg>", page, re.S):
            svg = ET.fromstring(text)
            charts[svg.get("aria-label")] = svg
        chart = charts["experiment 1: lineage (who was cloned from whom)"]
        bars = {g.get("data-trial"): g for g in chart.findall(SVG + "g")}
        self.assertEqual(sorted(bars), sorted(trials))
        for tid, g in bars.items():
            tip = g.find(SVG + "title").text
            if tid in clones:
                parent = clones[tid]["parent"]
                self.assertEqual(g.get("data-parent"), parent["trial"])
                self.assertIn("trial %s, cloned from %s @ %d, steps %d–6, "
                              % (tid, parent["trial"], parent["step"], parent["step"]), tip)
                self.assertEqual(len(g.findall(SVG + "line[@class='clone-link']")), 1)
            else:
                self.assertIsNone(g.get("data-parent"))
                self.assertRegex(tip, r"^trial %s, steps 0–\d, (COMPLETED|STOPPED)" % re.escape(tid))
        # Family order: every clone is drawn below its parent.
        order = [g.get("data-trial") for g in chart.findall(SVG + "g")]
        for tid, t in clones.items():
            self.assertLess(order.index(t["parent"]["trial"]), order.index(tid))
        # The trial table names each clone's parent and step.
        self.assertIn("<th>cloned from</th>", page)
        for tid, t in trials.items():
            cell = "%s @ %d" % (t["parent"]["trial"], t["parent"]["step"]) if tid in clones else ""
            self.assertRegex(page, r"<td>%s</td>(<td>[^<]*</td>){4}<td>%s</td>"
                             % (re.escape(tid), re.escape(cell)))
        # A search without clones has no lineage section.
        self.write("exp.yaml", CONFIG)
        self.cairn("run", "exp.yaml", check=0)
        self.cairn("report", "2", "-o", "random.html", check=0)
        with open(os.path.join(self.dir, "random.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn("Lineage", page)
        self.assertNotIn("cloned from", page)

    def test_bad_ids_and_outputs_are_bad_input_and_write_nothing(self):
        self.write("exp.yaml", CONFIG.replace("max_trials: 4", "max_trials: 1"))
        self.cairn("run", "exp.yaml", check=0)
        os.mkdir(os.path.join(self.dir, "adir"))
        cases = [
            (("report", "1.1", "-o", "r.html"), "report needs an experiment id, not a trial"),
            (("report", "9", "-o", "r.html"), "9"),
            (("report", "1", "-o", "adir"), "-o adir: is a directory; name the file to write"),
            (("report", "1"), "--output is required"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                proc = self.cairn(*args, check=2)
                self.assertTrue(proc.stderr.startswith("cairn: error: "), proc.stderr)
                self.assertIn(message, proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "r.html")))



CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

ASHA_CONFIG = """entrypoint: builtin:mlp
hyperparameters:
  lr: {type: log, minval: -3, maxval: -1, base: 10}
  optimizer: {type: categorical, vals: [sgd, adam]}
  hidden: 16
  samples: 300
searcher: {name: asha, metric: val_loss, max_length: 9, max_trials: 6, max_rungs: 3,
           max_concurrent_trials: 2}
reproducibility: {seed: 5}
"""


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of a non-interlaced 8-bit PNG, unfiltered."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), "an 8-bit RGB(A) PNG"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


# chromium is installed by `./install.sh --test` like zsh and fish: not a capability a machine
# may lack (tests/README.md), so its absence fails these tests rather than skipping them.
class ReportInBrowserTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.assertIsNotNone(CHROMIUM, "no chromium to open the report in: ./install.sh --test "
                             "installs Debian's chromium")
    def browser(self, *args):
        """Runs headless chromium; returns (stdout, the page's console messages)."""
        profile = tempfile.mkdtemp(dir=self.dir)
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", *args],
            capture_output=True, text=True, timeout=90, cwd=self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return proc.stdout, [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]

    def test_console_messages_are_seen(self):
        # The check below can fail: a page that logs is caught.
        self.write("noisy.html", "<html><body><script>console.error('boom')</script></body></html>")
        _, console = self.browser("--dump-dom", "file://" + os.path.join(self.dir, "noisy.html"))
        self.assertTrue(any("boom" in ln for ln in console), console)

    def test_the_report_renders_with_every_curve_and_point(self):
        self.write("exp.yaml", ASHA_CONFIG)
        self.cairn("run", "exp.yaml", check=0)
        self.cairn("report", "1", "-o", "report.html", check=0)
        url = "file://" + os.path.join(self.dir, "report.html")
        dom, console = self.browser("--dump-dom", url)
        self.assertEqual(console, [], "the page logs nothing")
        trials = self.cairn_json("show", "1", "--json")["trials"]
        validations = sum(len(self.cairn_json("metrics", t["id"], "--json")["validation"])
                          for t in trials)
        # What the browser built from the page: every trial a curve, every validation a
        # point, every validated trial a line in the parallel coordinates.
        series = re.findall(r'<g class="series( best)?" data-trial="([^"]+)"', dom)
        curves = [s for s in series]
        self.assertEqual(len(dom.split("at each validation</text>")), 2)
        validated = {t["id"] for t in trials if t.get("best_validation")}
        self.assertTrue(validated)
        val_curves = dom.split('aria-label="val_loss at each validation"')[1].split("</svg>")[0]
        self.assertEqual(sorted(re.findall(r'<g class="series(?: best)?" data-trial="([^"]+)"',
                                           val_curves)), sorted(validated))
        self.assertEqual(len(re.findall(r'<circle class="point', val_curves)), validations)
        self.assertEqual(len(re.findall(r'class="series best"', val_curves)), 1)
        self.assertTrue(curves)
        parallel = dom.split('aria-label="parallel coordinates')[1].split("</svg>")[0]
        self.assertEqual(len(re.findall(r'<polyline class="trial-line', parallel)), len(validated))
        self.assertIn("brackets and rungs", dom)

        shot = os.path.join(self.dir, "shot.png")
        self.browser("--screenshot=" + shot, "--window-size=1280,2400", "--hide-scrollbars", url)
        width, height, bpp, rows = png_pixels(shot)
        self.assertEqual((width, height), (1280, 2400))
        # Not blank: many pixels are not the white background, in several colours.
        inked, colours = 0, set()
        for row in rows[::4]:
            for x in range(0, width * bpp, bpp * 4):
                px = row[x:x + 3]
                if px != b"\xff\xff\xff":
                    inked += 1
                    colours.add(px)
        self.assertGreater(inked, 2000)
        self.assertGreater(len(colours), 20)

    def test_a_pbt_report_renders_its_lineage(self):
        self.write("pbt.yaml", CONFIG.replace(
            "searcher: {name: random, metric: val_loss, max_length: 3, max_trials: 4}",
            "searcher: {name: pbt, metric: val_loss, max_length: 6, population_size: 4, "
            "perturbation_interval: 2}"))
        self.cairn("run", "pbt.yaml", check=0, timeout=300)
        self.cairn("report", "1", "-o", "pbt.html", check=0)
        dom, console = self.browser("--dump-dom", "file://" + os.path.join(self.dir, "pbt.html"))
        self.assertEqual(console, [], "the page logs nothing")
        trials = self.cairn_json("show", "1", "--json")["trials"]
        chart = dom.split('aria-label="experiment 1: lineage')[1].split("</svg>")[0]
        self.assertEqual(sorted(re.findall(r'<g class="lineage-trial" data-trial="([^"]+)"', chart)),
                         sorted(t["id"] for t in trials))
        self.assertEqual(sorted(re.findall(r'data-parent="([^"]+)"', chart)),
                         sorted(t["parent"]["trial"] for t in trials if t.get("parent")))
        self.assertEqual(len(re.findall(r'class="clone-link"', chart)),
                         len([t for t in trials if t.get("parent")]))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
