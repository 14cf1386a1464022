"""The user-facing reference stays true to the binary.

Checks that the man page renders without warnings, that every command and option the
binary lists is documented in man/cairn.1 and offered by the three completion scripts —
each option under its own command, so an option missing from one command is caught even
when another command has an option of the same name — that `cairn completion SHELL`
prints the shipped files byte for byte, and that the completion scripts load and
complete what they should.

Environment: CAIRN_SOURCE_DIR (the repository root) and CAIRN_BIN (the built binary),
both set by ctest.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402

SOURCE_DIR = Path(os.environ.get("CAIRN_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CAIRN_BIN = Path(os.environ.get("CAIRN_BIN", SOURCE_DIR / "build" / "cairn"))
MAN_PAGE = SOURCE_DIR / "man" / "cairn.1"
COMPLETIONS = {
    "bash": SOURCE_DIR / "completions" / "cairn.bash",
    "zsh": SOURCE_DIR / "completions" / "_cairn",
    "fish": SOURCE_DIR / "completions" / "cairn.fish",
}
TIMEOUT_S = 60


def run(args, **kwargs):
    env = dict(os.environ, NO_COLOR="1", LC_ALL="C.UTF-8")
    env.update(kwargs.pop("env", {}))
    return subprocess.run(args, capture_output=True, timeout=TIMEOUT_S, env=env, **kwargs)


def require_tool(test, tool):
    # ./install.sh --test installs every tool these tests use: a missing one is a failure,
    # not a skip (tests/README.md, "Skips").
    test.assertTrue(shutil.which(tool), "%s is not installed (./install.sh --test installs it)" % tool)


def require_binary(test):
    if not CAIRN_BIN.is_file():
        test.fail(f"{CAIRN_BIN} does not exist: build cairn first (cmake --build build)")


# --- What the binary says about itself (CLI11's help format) -----------------------


def help_sections(text):
    """Maps each section heading of a CLI11 help text ("Options", "Subcommands", …) to
    the first words of its entries: option names, or command names."""
    sections, heading = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Za-z][\w ]*:\s*", line):
            heading = line.strip().rstrip(":").lower()
            sections.setdefault(heading, [])
        elif heading and re.match(r" {1,8}\S", line):
            # Entries are indented a little; wrapped descriptions much more.
            sections[heading].append(line.split()[0])
    return sections


def listed_commands(help_text):
    sections = help_sections(help_text)
    commands = []
    for heading, entries in sections.items():
        if heading in ("options", "positionals") or heading.startswith("usage"):
            continue
        commands += [e for e in entries if re.fullmatch(r"[a-z][a-z0-9_-]*", e)]
    return commands


def listed_options(help_text):
    options = []
    for entry in help_sections(help_text).get("options", []):
        options += [o for o in entry.split(",") if re.fullmatch(r"--?[A-Za-z][\w-]*", o)]
    return options


# --- What the docs say -------------------------------------------------------------


def man_source():
    return MAN_PAGE.read_text(encoding="utf-8")


def man_command_entries(source=None):
    """Maps each command documented under COMMANDS (a top-level .TP whose tag is
    "cairn NAME") to its text, with roff's escaped hyphens made plain."""
    source = man_source() if source is None else source
    section = source.split("\n.SH COMMANDS\n", 1)[1].split("\n.SH ", 1)[0]
    entries, name, depth, tag_next = {}, None, 0, False
    for line in section.splitlines():
        match = re.match(r'\.BR? "cairn ([a-z][\w-]*)"', line)
        if tag_next and match:
            name = match.group(1)
            entries[name] = ""
        depth += {".RS": 1, ".RE": -1}.get(line.split(" ")[0], 0)
        tag_next = line == ".TP" and depth == 0
        if name:
            entries[name] += line.replace("\\-", "-") + "\n"
    return entries


def mentions(text, option):
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def completion_commands(shell, text=None):
    text = COMPLETIONS[shell].read_text(encoding="utf-8") if text is None else text
    if shell == "bash":
        return re.search(r'local commands="([^"]*)"', text).group(1).split()
    if shell == "zsh":
        block = re.search(r"commands=\(\n(.*?)\n\s*\)", text, re.S).group(1)
        return re.findall(r"^\s*'([a-z][\w-]*):", block, re.M)
    return re.findall(r"-n __cairn_needs_command -a ([a-z][\w-]*)", text)


def completion_blocks(shell, text):
    """Maps each command to the part of a completion script that completes it: its branch
    of the `case` on the command (bash, zsh), or its `__cairn_using_command` lines (fish)."""
    blocks = {}
    if shell == "fish":
        for line in text.splitlines():
            match = re.search(r"__cairn_using_command ([a-z][\w -]*?)(?:;|')", line)
            for name in match.group(1).split() if match else []:
                blocks[name] = blocks.get(name, "") + line + "\n"
        return blocks
    start = {"bash": "case $command in\n", "zsh": "case $words[1] in\n"}[shell]
    body = text.split(start, 1)[1].split("\n  esac\n", 1)[0]
    for patterns, branch in re.findall(r"(?m)^ {4}([a-z][\w |-]*)\)(.*?);;", body, re.S):
        for name in patterns.split("|"):
            blocks[name.strip()] = blocks.get(name.strip(), "") + branch
    return blocks


def offered_for(shell, text, command, option):
    """Whether the completion script `text` for `shell` offers `option` after `command`.
    -h/--help are offered for every command by shared code, so anywhere in the script counts."""
    if option not in ("-h", "--help"):
        text = completion_blocks(shell, text).get(command, "")
    if shell == "fish":
        flag = "-l" if option.startswith("--") else "-s"
        option = f"{flag} {option.lstrip('-')}"
    return mentions(text, option)


def completion_texts():
    return {shell: path.read_text(encoding="utf-8") for shell, path in COMPLETIONS.items()}


class DocsAgreeWithEachOther(unittest.TestCase):
    """Runs without the binary: the man page and the three scripts name the same commands."""

    def test_completions_and_man_page_name_the_same_commands(self):
        documented = sorted(man_command_entries())
        self.assertIn("run", documented)
        for shell in COMPLETIONS:
            with self.subTest(shell=shell):
                self.assertEqual(sorted(completion_commands(shell)), documented)

    def test_every_command_has_its_own_completion_block(self):
        for shell, text in completion_texts().items():
            with self.subTest(shell=shell):
                blocks = completion_blocks(shell, text)
                for command in completion_commands(shell, text):
                    self.assertIn(command, blocks, COMPLETIONS[shell])

    def test_an_option_missing_from_one_command_is_caught(self):
        # `gc --json`: --json is offered for other commands (ls, show, …), so only a check
        # per command notices it is gone from gc's own completion or man page entry.
        texts = completion_texts()
        for shell, text in texts.items():
            with self.subTest(shell=shell):
                self.assertTrue(offered_for(shell, text, "gc", "--json"))
                if shell == "fish":
                    without = "\n".join(line for line in text.splitlines()
                                        if not re.search(r"__cairn_using_command gc\b.* -l json", line))
                else:
                    branch = completion_blocks(shell, text)["gc"]
                    without = text.replace(branch, branch.replace("--json", ""))
                self.assertNotEqual(without, text)
                self.assertTrue(mentions(without, "--json" if shell != "fish" else "-l json"))
                self.assertFalse(offered_for(shell, without, "gc", "--json"))
        source = man_source()
        gc_entry = source.split('.BR "cairn gc"', 1)[1].split("\n.TP\n.BR", 1)[0]
        self.assertIn("\\-\\-json", gc_entry)
        without = source.replace(gc_entry, gc_entry.replace("\\-\\-json", ""))
        self.assertTrue(mentions(man_command_entries(source)["gc"], "--json"))
        self.assertFalse(mentions(man_command_entries(without)["gc"], "--json"))

    def test_embedded_scripts_cannot_end_the_raw_string_they_are_embedded_in(self):
        # cmake/embed.cmake wraps each file in R"CAIRN_EMBED( … )CAIRN_EMBED".
        for shell, path in COMPLETIONS.items():
            with self.subTest(shell=shell):
                self.assertNotIn(')CAIRN_EMBED"', path.read_text(encoding="utf-8"))


class ManPage(unittest.TestCase):
    def test_renders_with_groff_without_warnings(self):
        require_tool(self, "groff")
        result = run(["groff", "-man", "-Tutf8", "-ww", "-z", str(MAN_PAGE)])
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        self.assertEqual(result.stderr.decode(), "")

    def test_renders_with_man(self):
        require_tool(self, "man")
        result = run(["man", "--warnings", "-l", str(MAN_PAGE)], env={"MANWIDTH": "80"})
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        self.assertEqual(result.stderr.decode(), "")
        text = result.stdout.decode()
        for section in ("NAME", "SYNOPSIS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES"):
            self.assertRegex(text, rf"(?m)^{section}$")


class DocsMatchTheBinary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.help_text = ""
        if CAIRN_BIN.is_file():
            cls.help_text = run([str(CAIRN_BIN), "--help"]).stdout.decode()

    def setUp(self):
        require_binary(self)

    def commands(self):
        commands = listed_commands(self.help_text)
        self.assertIn("run", commands, f"no command list in `cairn --help`:\n{self.help_text}")
        return commands

    def test_every_command_is_in_the_man_page_and_the_completions(self):
        documented = man_command_entries()
        for command in self.commands():
            with self.subTest(command=command):
                self.assertIn(command, list(documented), "man/cairn.1, COMMANDS")
                for shell in COMPLETIONS:
                    self.assertIn(command, completion_commands(shell), COMPLETIONS[shell])

    def test_every_documented_command_exists(self):
        self.assertEqual(sorted(man_command_entries()), sorted(self.commands()))

    def test_every_option_is_in_the_man_page_and_the_completions(self):
        scripts = completion_texts()
        man_text = man_source().replace("\\-", "-")
        for option in listed_options(self.help_text):
            with self.subTest(option=option):
                self.assertTrue(mentions(man_text, option), f"{option} not in man/cairn.1")
                self.assert_offered(scripts, option)
        entries = man_command_entries()
        for command in self.commands():
            result = run([str(CAIRN_BIN), command, "--help"])
            self.assertEqual(result.returncode, 0, f"cairn {command} --help: {result.stderr}")
            for option in listed_options(result.stdout.decode()):
                with self.subTest(command=command, option=option):
                    if option not in ("-h", "--help"):
                        self.assertTrue(mentions(entries.get(command, ""), option),
                                        f"{option} not under cairn {command} in man/cairn.1")
                    for shell, text in scripts.items():
                        self.assertTrue(offered_for(shell, text, command, option),
                                        f"{option} not offered after `cairn {command}` "
                                        f"by {COMPLETIONS[shell]}")

    def assert_offered(self, scripts, option):
        for shell in ("bash", "zsh"):
            self.assertTrue(mentions(scripts[shell], option), f"{option} not in {COMPLETIONS[shell]}")
        fish_flag = "-l" if option.startswith("--") else "-s"
        fish_option = f"{fish_flag} {option.lstrip('-')}"
        self.assertTrue(mentions(scripts["fish"], fish_option), f"{option} not in {COMPLETIONS['fish']}")

    def test_completion_prints_the_shipped_files(self):
        for shell, path in COMPLETIONS.items():
            with self.subTest(shell=shell):
                result = run([str(CAIRN_BIN), "completion", shell])
                self.assertEqual(result.returncode, 0, result.stderr.decode())
                self.assertEqual(result.stdout, path.read_bytes())

    def test_completion_of_an_unknown_shell_is_bad_usage(self):
        result = run([str(CAIRN_BIN), "completion", "tcsh"])
        self.assertEqual(result.returncode, 2, result.stderr.decode())

    def test_printed_bash_completion_loads(self):
        script = f'source <("{CAIRN_BIN}" completion bash) && complete -p cairn'
        result = run(["bash", "-c", script])
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        self.assertIn("-F _cairn", result.stdout.decode())


# Completes LINE (the cursor at its end) as bash would, splitting words at "=" as
# COMP_WORDBREAKS does, and prints the candidates one per line.
BASH_COMPLETE = r"""
source "$1"
line=$2
words=${line//=/ = }
read -ra COMP_WORDS <<<"$words"
[[ $line == *" " || $line == *"=" ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$line
COMP_POINT=${#line}
COMPREPLY=()
_cairn
printf '%s\n' "${COMPREPLY[@]}"
"""


class BashCompletion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        # A stand-in for the hidden `cairn __complete ids`, recording how it was called.
        cls.fake = root / "fake-cairn"
        cls.calls = root / "calls"
        cls.fake.write_text(
            f"#!/bin/sh\necho \"$*\" >> '{cls.calls}'\nprintf '1\\n1.1\\n1.2\\n2\\n2.1\\n'\n"
        )
        cls.fake.chmod(0o755)
        cls.workdir = root / "work"
        (cls.workdir / "configs").mkdir(parents=True)
        for name in ("quick.yaml", "other.yml", "notes.txt", "page.html"):
            (cls.workdir / name).write_text("")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def complete(self, line):
        line = line.replace("cairn", str(self.fake), 1)
        result = run(["bash", "-c", BASH_COMPLETE, "bash", str(COMPLETIONS["bash"]), line],
                     cwd=self.workdir)
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        self.assertEqual(result.stderr.decode(), "")
        return sorted(filter(None, result.stdout.decode().split("\n")))

    def test_script_loads(self):
        result = run(["bash", "-c", f'source "{COMPLETIONS["bash"]}" && complete -p cairn'])
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        self.assertIn("-F _cairn", result.stdout.decode())

    def test_commands(self):
        self.assertEqual(self.complete("cairn "), sorted(completion_commands("bash")))
        self.assertEqual(self.complete("cairn ch"), ["checkpoints"])
        self.assertEqual(self.complete("cairn --store /tmp/s "), sorted(completion_commands("bash")))

    def test_options(self):
        self.assertEqual(self.complete("cairn ls --"), ["--all", "--help", "--json"])
        self.assertIn("--follow", self.complete("cairn logs 1.1 -"))
        self.assertEqual(self.complete("cairn --v"), ["--version"])
        # run's --peers takes auto as peers' does (docs/peers.md "Discovery").
        self.assertEqual(self.complete("cairn run --peers "), ["auto"])
        self.assertEqual(self.complete("cairn peers --peers "), ["auto"])

    def test_config_files_after_run(self):
        self.assertEqual(self.complete("cairn run "), ["configs", "other.yml", "quick.yaml"])
        self.assertEqual(self.complete("cairn run --set a.b=1 q"), ["quick.yaml"])
        self.assertEqual(self.complete("cairn run quick.yaml "), [])

    def test_report_takes_an_experiment_and_an_html_file(self):
        self.assertEqual(self.complete("cairn report "), ["1", "2"])
        self.assertEqual(self.complete("cairn report 1 --"), ["--help", "--output"])
        self.assertEqual(self.complete("cairn report 1 -o "), ["configs", "page.html"])
        self.assertEqual(self.complete("cairn report -o page.html "), ["1", "2"])

    def test_ids_from_the_store(self):
        self.assertEqual(self.complete("cairn show "), ["1", "1.1", "1.2", "2", "2.1"])
        self.assertEqual(self.complete("cairn logs --rank 1 "), ["1.1", "1.2", "2.1"])
        self.assertEqual(self.complete("cairn metrics 2"), ["2.1"])
        self.assertEqual(self.complete("cairn export 1.1@"), ["1.1@best", "1.1@latest"])
        self.assertEqual(self.complete("cairn export 1.1@best "), ["configs"])

    def test_experiment_ids_for_experiment_commands(self):
        for command in ("pause", "kill", "best", "watch", "gc"):
            with self.subTest(command=command):
                self.assertEqual(self.complete(f"cairn {command} "), ["1", "2"])
        self.assertEqual(self.complete("cairn watch --interval 2 "), ["1", "2"])
        self.assertEqual(self.complete("cairn best 1 "), [])

    def test_resume_offers_experiments_and_all(self):
        self.assertEqual(self.complete("cairn resume "), ["--all", "1", "2"])
        self.assertEqual(self.complete("cairn resume --"), ["--all", "--help", "--key-file"])
        self.assertEqual(self.complete("cairn resume --all "), [])
        self.assertEqual(self.complete("cairn resume 1 "), [])

    def test_reproduce_offers_trials_after_its_placement_options(self):
        self.assertEqual(self.complete("cairn reproduce "), ["1.1", "1.2", "2.1"])
        self.assertEqual(self.complete("cairn reproduce --peers a:1,b:2 --slots 0 "),
                         ["1.1", "1.2", "2.1"])
        self.assertEqual(self.complete("cairn reproduce --peers "), ["auto"])
        self.assertEqual(self.complete("cairn run --peers "), ["auto"])
        self.assertEqual(self.complete("cairn peers --peers "), ["auto"])
        self.assertEqual(self.complete("cairn resume --key-file "),
                         ["configs", "notes.txt", "other.yml", "page.html", "quick.yaml"])
        self.assertEqual(self.complete("cairn reproduce --slots "), [])
        self.assertEqual(self.complete("cairn reproduce --key-file "),
                         ["configs", "notes.txt", "other.yml", "page.html", "quick.yaml"])
        self.assertEqual(self.complete("cairn reproduce 1.1 --"),
                         ["--allow-data-change", "--help", "--key-file", "--peers", "--slots",
                          "--verify"])

    def test_options_of_the_experiment_commands(self):
        self.assertEqual(self.complete("cairn best 1 --"), ["--checkpoint", "--help"])
        self.assertEqual(self.complete("cairn watch --"), ["--help", "--interval"])
        self.assertEqual(self.complete("cairn gc --"), ["--help", "--json"])
        self.assertEqual(self.complete("cairn watch --interval "), [])
        self.assertEqual(self.complete("cairn kill --"), ["--help"])

    def test_store_option_reaches_the_id_query(self):
        self.calls.unlink(missing_ok=True)
        self.complete("cairn --store /tmp/elsewhere checkpoints ")
        self.assertEqual(self.calls.read_text(), "--store /tmp/elsewhere __complete ids\n")

    def test_shells(self):
        self.assertEqual(self.complete("cairn completion "), ["bash", "fish", "zsh"])


class OtherShells(unittest.TestCase):
    def test_zsh_syntax(self):
        require_tool(self, "zsh")
        result = run(["zsh", "-n", str(COMPLETIONS["zsh"])])
        self.assertEqual(result.returncode, 0, result.stderr.decode())

    def test_fish_syntax(self):
        require_tool(self, "fish")
        result = run(["fish", "--no-execute", str(COMPLETIONS["fish"])])
        self.assertEqual(result.returncode, 0, result.stderr.decode())


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
