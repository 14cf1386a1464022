"""End to end: the zsh and fish completion scripts complete (not only parse), as README.md
promises. zsh runs interactively on a pseudo-terminal with compinit and the shipped _cairn
on $fpath; a TAB there is captured by wrapping compadd, the builtin every completion
function ends in. fish answers `complete -C LINE`. Both ask the real binary for ids
(`cairn __complete ids`) in a real store made by real experiments.
tests/e2e/test_docs.py has bash's (with a stand-in binary) and the syntax checks."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, SOURCE, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402
from test_docs import listed_commands  # noqa: E402

TRAIN = r'''
import cairn
ctx = cairn.init()
for op in ctx.operations():
    with ctx.checkpoint(op.length) as path:
        (path / "w").write_text("1")
    ctx.report_validation(op.length, {"val_loss": float(ctx.hparams["x"])})
'''

GRID = """entrypoint: /usr/bin/python3 train.py
hyperparameters:
  x: {type: int, minval: 1, maxval: 2, count: 2}
searcher: {name: grid, metric: val_loss, max_length: 1}
"""

# Set up in the interactive zsh: completion as a user has it (compinit, _cairn autoloaded
# from $fpath), no listing or menu to get in the way of the keys that follow, and a compadd
# that first notes the matches it adds (those of the word on the line) in $CAPTURE. C-x m
# marks the end of one completion in that file; C-u clears the line for the next.
ZSH_SETUP = r'''
PS1='zsh-ready> '
fpath=("$COMPLETION_DIR" $fpath)
autoload -Uz compinit && compinit -u -D
unsetopt auto_list list_ambiguous auto_menu beep
bindkey '^I' complete-word
compadd() {
  if (( ${@[(I)-[OAD]]} )); then builtin compadd "$@"; return; fi
  local -a __hits
  builtin compadd -O __hits "$@"
  (( $#__hits )) && print -rl -- $__hits >> $CAPTURE
  builtin compadd "$@"
}
_capture_mark() { print -r -- '--end--' >> $CAPTURE }
zle -N _capture_mark
bindkey '^Xm' _capture_mark
bindkey '^U' kill-whole-line
print -r -- set-up-$$
'''


def make_store(test):
    """Two experiments in the test's directory: 1 with trials 1.1 and 1.2, 2 with 2.1 and
    2.2. The workdir has two configs, a directory and a file that is neither."""
    test.write("train.py", TRAIN)
    test.write("grid.yaml", GRID)
    test.write("configs/other.yml", GRID)
    test.write("notes.txt", "")
    test.cairn("run", "grid.yaml", check=0, timeout=120)
    test.cairn("run", "grid.yaml", check=0, timeout=120)


def home_dir(test):
    """An empty home for the shell, outside the workdir whose files are completed."""
    path = tempfile.mkdtemp(prefix="cairn-home-")
    test.addCleanup(shutil.rmtree, path, True)
    return path


def bin_dir(test):
    """A directory whose `cairn` is the binary under test, to put first on PATH."""
    path = tempfile.mkdtemp(prefix="cairn-bin-")
    test.addCleanup(shutil.rmtree, path, True)
    os.symlink(os.path.abspath(CAIRN) if os.path.sep in CAIRN else shutil.which(CAIRN),
               os.path.join(path, "cairn"))
    return path


def commands():
    help_text = subprocess.run([CAIRN, "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    return sorted(listed_commands(help_text))


class ZshCompletes(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(shutil.which("zsh"),
                        "zsh is not installed (./install.sh --test installs it)")
        make_store(self)
        self.home = home_dir(self)
        self.capture = os.path.join(self.home, "capture")
        self.start_zsh(os.path.join(SOURCE, "completions"))

    def start_zsh(self, completion_dir, setup_more=""):
        env = self.cairn_env({"CAPTURE": self.capture, "COMPLETION_DIR": completion_dir,
                              "PATH": bin_dir(self) + os.pathsep + os.environ["PATH"],
                              "TERM": "dumb", "HOME": self.home, "ZDOTDIR": self.home})
        setup = os.path.join(self.home, "setup.zsh")
        with open(setup, "w") as f:
            f.write(ZSH_SETUP.replace("print -r -- set-up", setup_more + "print -r -- set-up"))
        self.zsh = self.on_pty(["zsh", "-f", "-i"], env=env)
        self.zsh.write("source %s\n" % setup)
        # Keys typed before the line editor reads them go through the terminal's own line
        # discipline (C-u erases the line there): wait for the prompt after the set-up.
        marker = "set-up-%d" % self.zsh.proc.pid
        self.zsh.read_until(lambda t: marker in t and "zsh-ready> " in t.split(marker, 1)[1],
                            timeout=30, what="zsh to load compinit and the completion")

    def complete(self, line):
        """The candidates zsh offers for the last word of `line` (the cursor at its end)."""
        if os.path.exists(self.capture):
            os.remove(self.capture)
        self.zsh.write(line + "\t\x18m\x15")
        deadline = time.monotonic() + 20
        while True:
            if os.path.exists(self.capture):
                with open(self.capture) as f:
                    text = f.read()
                if text.endswith("--end--\n"):
                    return sorted(set(text.split("\n")[:-2]))
            if time.monotonic() > deadline or self.zsh.proc.poll() is not None:
                self.fail("zsh did not complete %r; the terminal showed:\n%r"
                          % (line, self.zsh.text[-3000:]))
            self.zsh._read_some(0.05)

    def test_commands(self):
        self.assertEqual(self.complete("cairn "), commands())
        self.assertEqual(self.complete("cairn re"), ["report", "reproduce", "resume"])
        self.assertEqual(self.complete("cairn --store .cairn ch"), ["checkpoints"])
        self.assertEqual(self.complete("cairn help wa"), ["watch"])

    def test_options(self):
        self.assertEqual(self.complete("cairn ls --"), ["--all", "--help", "--json"])
        self.assertEqual(self.complete("cairn best 1 --"), ["--checkpoint", "--help"])
        self.assertIn("--detach", self.complete("cairn run --"))
        self.assertIn("--diff", self.complete("cairn compare 1.1 2.1 --"))
        self.assertEqual(self.complete("cairn resume --a"), ["--all"])
        self.assertEqual(self.complete("cairn run --peers "), ["auto"])
        self.assertEqual(self.complete("cairn peers --peers "), ["auto"])
        self.assertEqual(self.complete("cairn reproduce --p"), ["--peers"])
        self.assertEqual(self.complete("cairn reproduce --peers="), ["auto"])
        self.assertEqual(self.complete("cairn reproduce --slots 0 --peers a:1 "),
                         ["1.1", "1.2", "2.1", "2.2"])

    def test_ids_from_the_store(self):
        self.assertEqual(self.complete("cairn show "), ["1", "1.1", "1.2", "2", "2.1", "2.2"])
        self.assertEqual(self.complete("cairn show 2."), ["2.1", "2.2"])
        self.assertEqual(self.complete("cairn logs "), ["1.1", "1.2", "2.1", "2.2"])
        self.assertEqual(self.complete("cairn compare 1.1 "),
                         ["1", "1.1", "1.2", "2", "2.1", "2.2"])
        for command in ("resume", "pause", "kill", "best", "watch", "report", "gc"):
            with self.subTest(command=command):
                self.assertEqual(self.complete("cairn %s " % command), ["1", "2"])
        self.assertEqual(self.complete("cairn export 1.2@"), ["1.2@best", "1.2@latest"])

    def test_files(self):
        # zsh's file completion adds a directory's "/" itself, after the match.
        self.assertEqual(self.complete("cairn run "), ["configs", "grid.yaml"])
        self.assertEqual(self.complete("cairn run configs/"), ["other.yml"])
        self.assertEqual(self.complete("cairn completion "), ["bash", "fish", "zsh"])

    def test_the_printed_script_sourced_after_compinit_completes_too(self):
        # `source <(cairn completion zsh)`, README's other way, instead of $fpath.
        self.zsh.close()
        self.start_zsh(tempfile.mkdtemp(dir=self.home),
                       'source <(cairn completion zsh)\n')
        self.assertEqual(self.complete("cairn wa"), ["watch"])
        self.assertEqual(self.complete("cairn best "), ["1", "2"])


class FishCompletes(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(shutil.which("fish"),
                        "fish is not installed (./install.sh --test installs it)")
        make_store(self)
        home = home_dir(self)
        self.env = self.cairn_env({"PATH": bin_dir(self) + os.pathsep + os.environ["PATH"],
                                   "HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home})

    def complete(self, line, load="source (cairn completion fish | psub)"):
        """The candidates fish offers for the last word of `line`, without descriptions."""
        script = "%s; and complete -C %s" % (load, shlex_quote_fish(line))
        proc = subprocess.run(["fish", "--no-config", "-c", script], cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""), line)
        return sorted(set(l.split("\t")[0] for l in proc.stdout.split("\n") if l))

    def test_commands(self):
        self.assertEqual(self.complete("cairn "), commands())
        self.assertEqual(self.complete("cairn re"), ["report", "reproduce", "resume"])
        self.assertEqual(self.complete("cairn --store .cairn ch"), ["checkpoints"])

    def test_options(self):
        self.assertEqual(self.complete("cairn ls --"), ["--all", "--help", "--json"])
        self.assertEqual(self.complete("cairn best 1 --"), ["--checkpoint", "--help"])
        self.assertIn("--detach", self.complete("cairn run --"))
        self.assertIn("--diff", self.complete("cairn compare 1.1 2.1 --"))
        self.assertEqual(self.complete("cairn resume --"), ["--all", "--help", "--key-file"])
        self.assertEqual(self.complete("cairn run --peers "), ["auto"])
        self.assertEqual(self.complete("cairn peers --peers "), ["auto"])
        self.assertEqual(self.complete("cairn reproduce --"),
                         ["--allow-data-change", "--help", "--key-file", "--peers", "--slots",
                          "--verify"])
        self.assertEqual(self.complete("cairn reproduce --peers "), ["auto"])
        self.assertEqual(self.complete("cairn reproduce --slots 0 --peers a:1 "),
                         ["1.1", "1.2", "2.1", "2.2"])

    def test_ids_from_the_store(self):
        self.assertEqual(self.complete("cairn show "), ["1", "1.1", "1.2", "2", "2.1", "2.2"])
        self.assertEqual(self.complete("cairn show 2."), ["2.1", "2.2"])
        self.assertEqual(self.complete("cairn logs "), ["1.1", "1.2", "2.1", "2.2"])
        for command in ("resume", "pause", "kill", "best", "watch", "report", "gc"):
            with self.subTest(command=command):
                self.assertEqual(self.complete("cairn %s " % command), ["1", "2"])
        self.assertEqual(self.complete("cairn export 1.2@"), ["1.2@best", "1.2@latest"])
        # The shipped file, as install.sh installs it, completes the same.
        shipped = "source %s" % shlex_quote_fish(os.path.join(SOURCE, "completions", "cairn.fish"))
        self.assertEqual(self.complete("cairn best ", load=shipped), ["1", "2"])

    def test_files(self):
        self.assertEqual(self.complete("cairn run "), ["configs/", "grid.yaml"])
        self.assertEqual(self.complete("cairn run configs/"), ["configs/other.yml"])
        self.assertEqual(self.complete("cairn completion "), ["bash", "fish", "zsh"])


def shlex_quote_fish(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
