"""What a checkpoint transfer tried again after a dropped link does not do twice (issue 17 item
8, docs/peers.md "Checkpoint transfers over a dropped link", "Resuming a content", "Orphans on
an agent"), between a real `cairn agent` on loopback and cairn, through
test_peers_transfer_drops.py's counting proxy, killed in the middle of the bytes and listening
again within the heartbeat timeout:

- an orphan's fetch by `cairn resume`: the content cut in the middle is asked for from the
  bytes the resume kept, as the live fetch does, so it crosses the link once (the bytes through
  the proxy), and the trial goes on from the orphan;
- a staged checkpoint's fetch tried again: the agent lists the directory again without reading
  its files (its log line says the digests it kept; its /proc/PID/io counts what it read);
- a staged checkpoint whose files change between the two listings (size and mtime kept): the
  new listing names the new contents, which are fetched; nothing is sent under an old digest."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import wait_until  # noqa: E402
from test_peers_orphans import HOLD_AT, TRAIN, OrphanTest  # noqa: E402
from test_peers_placement import Agent  # noqa: E402
from test_peers_transfer_drops import (BIG, BIG_BYTES, FILE_BYTES, FILES, MIB, SENT,  # noqa: E402
                                       CountingProxy, FastCountingProxy, TransferDropTest)

# test_peers_orphans.py's trial, whose orphan checkpoint (the one it takes when its channel
# closes, below the agent's orphans/) also holds one 200 MiB file.
RANK_FILE = '                (path / ("rank%d" % ctx.rank)).write_text(str(step))\n'
assert RANK_FILE in TRAIN
ORPHAN_TRAIN = TRAIN.replace(RANK_FILE, RANK_FILE + """\
                if "/orphans/" in str(path):
                    import hashlib
                    with open(os.path.join(str(path), "big.bin"), "wb") as f:
                        f.write(hashlib.sha256(b"orphan").digest() * (%d // 32))
""" % BIG_BYTES)

FETCHED = re.compile(r"trial 1\.1: fetched the checkpoint it took at step %d while cairn was away "
                     r"from agent \S+ \((\d+) files, (\d+) content bytes on the wire\)"
                     % (HOLD_AT + 1))


class Via:
    """An agent as the run knows it: through `proxy`'s address; its log is the agent's."""

    def __init__(self, agent, proxy):
        self.agent, self.address = agent, proxy.address

    def __getattr__(self, name):
        return getattr(self.agent, name)


class OrphanFetchRetryTest(OrphanTest):
    def setUp(self):
        super().setUp()
        self.write("orphan_train.py", ORPHAN_TRAIN)

    def test_an_orphans_content_cut_in_the_middle_is_asked_for_from_the_bytes_kept(self):
        a = Agent(self, "agent-a", 1)
        proxy = FastCountingProxy(self, a.port)
        via = Via(a, proxy)
        pids = self.held_then_killed([via], window=2)
        # Released once asked to checkpoint as orphans: the orphan is step HOLD_AT + 1's.
        a.wait_log("to checkpoint as orphans and exit")
        self.release_and_wait_for_orphans([a], pids)
        proxy.carried.clear()  # from here on: the resume's connections only
        resume, log = self.resume_in_background()

        def resume_text():
            with open(log.name) as f:
                return f.read()

        # Cut when half the orphan's one big content passed.
        wait_until(lambda: proxy.most(1) >= BIG_BYTES // 2, timeout=120, interval=0.01,
                   what="half of the orphan's content through the proxy")
        proxy.kill()
        self.assertLess(proxy.most(1), BIG_BYTES, "the whole content passed before the kill")
        try:
            wait_until(lambda: "orphaned checkpoint at step %d lost its connection" %
                       (HOLD_AT + 1) in resume_text(), timeout=60,
                       what="the resume to see the fetch's link drop")
        except AssertionError as e:
            raise AssertionError("%s; cairn resume wrote:\n%s\nthe agent:\n%s"
                                 % (e, resume_text(), a.text())) from None
        proxy.restart()
        self.assertEqual(resume.wait(timeout=240), 0, resume_text())
        text = resume_text()
        self.assertIn("continued on a new connection", text)
        self.assert_went_on_from_the_orphan(text, [a])
        # The content crossed once (frames, TLS, the rest of the run's checkpoints aside): asked
        # for from 0 again, the half that had passed would cross twice.
        self.assertLess(proxy.total(1), BIG_BYTES + 8 * MIB, proxy.carried)
        fetched = FETCHED.search(text)
        self.assertTrue(fetched, text)
        self.assertLess(int(fetched.group(2)), BIG_BYTES + MIB, text)
        # The try that completed went on from the bytes kept, and listed the orphan without
        # reading its files again (written long before the first listing).
        self.assertRegex(a.text(), r"sent the orphaned checkpoint of trial 1\.1 at step %d to "
                         r"\S+: (\d+) files \(\d+ bytes\), \d+ wanted, \d+ content bytes on the "
                         r"wire, 1 content resumed after \d+ bytes kept, \1 digests kept from an "
                         r"earlier listing" % (HOLD_AT + 1))
        # What the resume kept between the tries went with the fetch.
        staging = os.path.join(self.dir, ".cairn", "staging")
        self.assertEqual([n for n in os.listdir(staging) if "-orphan-" in n], [])


def read_chars(pid):
    """What process `pid` has read so far (rchar of /proc/PID/io: every read and pread, from
    the page cache or not)."""
    with open("/proc/%d/io" % pid) as f:
        return int(re.search(r"^rchar: (\d+)$", f.read(), re.M).group(1))


class FetchRetryListingTest(TransferDropTest):
    def test_a_fetch_tried_again_does_not_read_the_staged_files_again(self):
        self.write("train.py", BIG)
        a = Agent(self, "agent-a", 1)
        read_before = read_chars(a.process.pid)
        proxy = FastCountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        wait_until(lambda: proxy.most(1) >= BIG_BYTES // 2, timeout=120, interval=0.01,
                   what="half of the content through the proxy")
        proxy.kill()
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        self.assertNotIn("was not saved", self.output())
        sent = [l for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        # What the agent read: the file hashed once (200 MiB), sent about once (the first try's
        # part, then the rest), and little else. Hashed again it would be 200 MiB more.
        read = read_chars(a.process.pid) - read_before
        self.assertLess(read, 2 * BIG_BYTES + BIG_BYTES // 4, a.text())
        # The listing of the try that completed reused the digests of the files unchanged since
        # (the SDK's small file, written within a clock tick of the first listing, may have
        # been read again: ScanCache, peer/checkpoint_manifest.h).
        kept = re.search(r"(\d+) digests? kept from an earlier listing", sent[0])
        self.assertTrue(kept, sent[0])
        self.assertGreaterEqual(int(kept.group(1)), 1, sent[0])

    def test_a_file_changed_between_two_listings_is_fetched_under_its_new_digest(self):
        a = Agent(self, "agent-a", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        self.kill_mid_transfer(proxy, 1)
        self.wait_output(r"the connection dropped")
        staged = re.findall(r"\[1\.1\] checkpoint dir (\S+)", self.output())
        self.assertEqual(len(staged), 1, self.output())
        # Every file rewritten in place, one byte flipped, its size and mtime kept: only the
        # inode's ctime says it changed.
        for i in range(FILES):
            path = os.path.join(staged[0], "part-%d.bin" % i)
            st = os.stat(path)
            with open(path, "r+b") as f:
                f.seek(FILE_BYTES // 2)
                byte = f.read(1)
                f.seek(FILE_BYTES // 2)
                f.write(bytes([byte[0] ^ 1]))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            self.assertEqual(os.stat(path).st_mtime_ns, st.st_mtime_ns)
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        # Listed under an old digest, a content the coordinator holds would be registered as it
        # was, and one it lacks would not hash to its digest ("was not saved").
        self.assertNotIn("was not saved", text)
        sent = [l for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        self.assertEqual(int(SENT.search(sent[0]).group(4)), FILES, sent[0])  # all new
        # Only the files that did not change (the SDK's own) kept their digests.
        kept = re.search(r"(\d+) digests? kept from an earlier listing", sent[0])
        self.assertLessEqual(int(kept.group(1)) if kept else 0,
                             int(SENT.search(sent[0]).group(2)) - FILES, sent[0])
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertEqual(listed[0]["new_bytes"], listed[0]["bytes"], listed)


# The classes above take their helpers from other files' test cases, not their tests.
def own_tests_only(case, base):
    for name in dir(base):
        if name.startswith("test_") and name not in case.__dict__:
            setattr(case, name, None)


own_tests_only(OrphanFetchRetryTest, OrphanTest)
own_tests_only(FetchRetryListingTest, TransferDropTest)

if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
