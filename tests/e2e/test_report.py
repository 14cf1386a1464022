"""End to end: `cairn report EXP -o FILE.html` on a real search over builtin:mlp: one
self-contained page whose charts and table hold every trial, written whole; bad ids and
outputs are bad input."""
import os
import re
import sys
import unittest
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
        # One series per trial, named in its tooltip, with a line through its 3 validations.
        series = curves.findall(SVG + "g")
        self.assertEqual(sorted(g.find(SVG + "title").text for g in series),
                         sorted("trial " + t["id"] for t in trials))
        for g in series:
            self.assertEqual(len(g.find(SVG + "polyline").get("points").split()), 3)
        self.assertIn("training loss", charts)
        # The hyperparameters that vary get a plot; the constant ones do not.
        self.assertIn("val_loss vs lr", charts)
        self.assertIn("val_loss vs optimizer", charts)
        self.assertNotIn("val_loss vs hidden", charts)
        points = charts["val_loss vs lr"].findall(SVG + "circle")
        self.assertEqual(len(points), 4)

        rows = re.findall(r"<tr(?: class=\"best\")?><td>([^<]*)</td>", page)
        self.assertEqual(sorted(rows), sorted(t["id"] for t in trials))
        best = self.cairn("best", "1", check=0).stdout.strip()
        self.assertIn('<tr class="best"><td>%s</td>' % best, page)

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


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
