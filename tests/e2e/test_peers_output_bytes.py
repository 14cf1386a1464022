"""A rank's output reaches `cairn logs` byte for byte from an agent as from a local slot
(docs/peers.md "Running ranks"): bytes that are not UTF-8 (a Latin-1 word, binary) and
multi-byte characters that the agent's reads of the rank's pipe cut in two are stored as the
rank wrote them, not replaced with U+FFFD."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
from peer_testlib import Agent, agent_env, peer_home  # noqa: E402

# 200,000 characters of 2, 3 and 4 bytes: the agent reads the pipe in pieces of at most
# 64 KiB, which is not a multiple of the 9 bytes a group takes, so pieces end mid-character.
TRAIN = r"""
import sys
import cairn

ctx = cairn.init()
out = sys.stdout.buffer
out.write(b"BEGIN\n")
out.write(b"latin-1: caf\xe9\n")
out.write(b"binary: \x00\x01\x7f\xff\xfe\x80\n")
out.write(("\u00e9\u20ac\U0001F600" * 66667 + "\n").encode())
out.write(b"END\n")
out.flush()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
"""

CONFIG = """name: bytes
entrypoint: [/usr/bin/python3, train.py]
searcher: {name: single, metric: val_loss, max_length: 1}
max_restarts: 0
"""


class OutputBytesTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)

    def cairn_bytes(self, *args, timeout=240):
        """cairn's output as bytes (what the trial printed is on it, and is not all UTF-8)."""
        proc = subprocess.run([CAIRN] + list(args), cwd=self.dir, env=agent_env(self),
                              capture_output=True, timeout=timeout)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        return proc.stdout

    def logs(self, trial):
        out = self.cairn_bytes("logs", trial)
        begin, end = out.find(b"BEGIN\n"), out.find(b"END\n")
        self.assertTrue(0 <= begin < end, out[:2000])
        return out[begin:end + 4]

    def test_output_from_an_agent_is_stored_byte_for_byte_as_from_a_local_slot(self):
        self.cairn_bytes("run", "exp.yaml", "--slots", "1")
        agent = Agent(self, key=self.key, slots=1)
        self.cairn_bytes("run", "exp.yaml", "--slots", "0", "--peers", agent.address,
                         "--key-file", self.key)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["placement"][0]["machine"],
                         agent.address)
        expected = (b"BEGIN\nlatin-1: caf\xe9\nbinary: \x00\x01\x7f\xff\xfe\x80\n" +
                    ("\u00e9\u20ac\U0001F600" * 66667 + "\n").encode() + b"END\n")
        self.assertEqual(self.logs("1.1"), expected)
        on_agent = self.logs("2.1")
        self.assertNotIn("\ufffd".encode(), on_agent)
        self.assertEqual(on_agent, expected)


if __name__ == "__main__":
    cairn_testlib.main()
