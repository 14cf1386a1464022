"""Writes tests/fuzz/corpus/peer_beacon: seeds for tests/fuzz/peer_beacon_fuzz.cc, sealed
with its key (32 bytes of 'a') and stamped with its clock (1800000000000 ms). Each file is
datagrams, each after a length byte (255: the rest of the file)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
import beacon_forge  # noqa: E402

KEY = b"a" * 32
NOW = 1800000000000


def frame(*datagrams):
    return b"".join(bytes([len(d)]) + d for d in datagrams)


good = beacon_forge.seal(KEY, "10.0.0.5", 7070, NOW, nonce=bytes([7]) * 16)
other = beacon_forge.seal(b"b" * 32, "10.0.0.6", 7070, NOW, nonce=bytes([8]) * 16)
stale = beacon_forge.seal(KEY, "10.0.0.5", 7070, NOW - 60000, nonce=bytes([9]) * 16)
forged = good[:-1] + bytes([good[-1] ^ 1])
seeds = {
    "genuine": frame(good),
    "replayed": frame(good, good),
    "two_agents": frame(good, beacon_forge.seal(KEY, "10.0.0.7", 7071, NOW + 1000,
                                                nonce=bytes([10]) * 16)),
    "other_key": frame(other),
    "stale": frame(stale),
    "forged": frame(forged),
    "truncated": frame(good[:40]),
    "format2": frame(good[:4] + b"\x02" + good[5:]),
    "oversized": b"\xff" + good + b"x" * 300,
    "garbage": frame(b"GET / HTTP/1.1\r\n\r\n"),
    "ipv6": frame(beacon_forge.seal(KEY, "fe80::5", 7070, NOW, nonce=bytes([11]) * 16)),
    "ipv6_and_ipv4": frame(beacon_forge.seal(KEY, "2001:db8::5", 7071, NOW,
                                             nonce=bytes([12]) * 16), good),
    "ipv6_truncated": frame(beacon_forge.seal(KEY, "fe80::5", 7070, NOW,
                                              nonce=bytes([13]) * 16)[:77]),
    "ipv6_as_format1": frame(b"CRNB\x01" + beacon_forge.seal(KEY, "fe80::5", 7070, NOW,
                                                                  nonce=bytes([14]) * 16)[5:]),
}
for name, data in seeds.items():
    with open(os.path.join(HERE, "peer_beacon", name), "wb") as f:
        f.write(data)
