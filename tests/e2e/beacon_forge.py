"""Discovery beacons as a test (or an attacker) makes them, written from docs/peers.md's
description with Python's hmac module rather than from cairn's code: peer/beacon.h's format 1
(an IPv4 address), format 2 (an IPv6 address) and their HKDF-SHA256 subkey. tests/unit/peer_beacon_test.cc pins the same bytes."""
import hashlib
import hmac
import os
import socket
import struct

MAGIC = b"CRNB"
FORMAT = 1
FORMAT6 = 2
GROUP = "239.255.70.70"
GROUP6 = "ff12::7070"


def subkey(key_bytes):
    """HKDF-SHA256 (RFC 5869): salt "cairn beacon", info "cairn beacon hmac 1", 32 bytes."""
    prk = hmac.new(b"cairn beacon", key_bytes, hashlib.sha256).digest()
    return hmac.new(prk, b"cairn beacon hmac 1" + b"\x01", hashlib.sha256).digest()


def key_id(key_bytes):
    return hashlib.sha256(key_bytes).digest()[:8]


def seal(key_bytes, address, port, timestamp_ms, nonce=None, protocol=1, key_id_bytes=None):
    """A beacon naming `address`: format 2 when it is IPv6 ("fe80::1"), else format 1."""
    if ":" in address:
        form, packed = FORMAT6, socket.inet_pton(socket.AF_INET6, address)
    else:
        form, packed = FORMAT, socket.inet_aton(address)
    body = (MAGIC + bytes([form]) + struct.pack(">H", protocol) +
            packed + struct.pack(">H", port) +
            (key_id_bytes or key_id(key_bytes)) + struct.pack(">q", timestamp_ms) +
            (nonce if nonce is not None else os.urandom(16)))
    return body + hmac.new(subkey(key_bytes), body, hashlib.sha256).digest()


def fields(datagram):
    """(protocol, address, port, key id hex, timestamp ms) of a beacon's bytes (format 1 or
    2; the address "10.0.0.5" or "fe80::1")."""
    protocol, = struct.unpack(">H", datagram[5:7])
    if datagram[4] == FORMAT6:
        address, at = socket.inet_ntop(socket.AF_INET6, datagram[7:23]), 23
    else:
        address, at = socket.inet_ntoa(datagram[7:11]), 11
    port, = struct.unpack(">H", datagram[at:at + 2])
    timestamp, = struct.unpack(">q", datagram[at + 10:at + 18])
    return protocol, address, port, datagram[at + 2:at + 10].hex(), timestamp


if __name__ == "__main__":
    key = b"a" * 32
    print(subkey(key).hex())
    print(seal(key, "10.0.0.5", 7070, 1800000000000, nonce=bytes([7]) * 16).hex())
