"""Writes tests/fuzz/corpus/code_pack: seeds for tests/fuzz/code_pack_fuzz.cc.

Described trees (first byte odd): records [kind][name length][name][content length]
[content]; kind 0 file, 1 executable, 2 link, 3 directory (entries follow until kind 4),
5 and up replace the mode. Raw packs (first byte even): [20-byte tree id][pack], made by
git from a small tree."""
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "code_pack")


def rec(kind, name, content=b""):
    return bytes([kind, len(name)]) + name + bytes([len(content)]) + content


def described(*records, pieces=b""):
    return b"\x01" + b"".join(records) + pieces


SEEDS = {
    "one_file": described(rec(0, b"train.py", b"print(1)\n")),
    "executable": described(rec(1, b"run.sh", b"#!/bin/sh\n")),
    "dir_and_link": described(rec(0, b"a.txt", b"hi"), rec(3, b"lib"),
                              rec(2, b"l", b"../a.txt"), rec(4, b"")),
    "nested_link_up": described(rec(3, b"d"), rec(3, b"e"), rec(2, b"up", b"../../a"),
                                rec(4, b""), rec(4, b""), rec(0, b"a", b"x")),
    "dotdot": described(rec(0, b"..", b"owned")),
    "dot_dir": described(rec(3, b"."), rec(0, b"x", b"y"), rec(4, b"")),
    "absolute_name": described(rec(0, b"/tmp/owned", b"owned")),
    "slash_name": described(rec(0, b"a/../../owned", b"owned")),
    "empty_name": described(rec(0, b"", b"x")),
    "link_absolute": described(rec(2, b"l", b"/etc")),
    "link_climbs": described(rec(2, b"l", b"../x")),
    "link_after_name": described(rec(2, b"l", b"d/../../x")),
    "twice": described(rec(0, b"a", b"1"), rec(0, b"a", b"2")),
    "dir_and_link_same_name": described(rec(3, b"a"), rec(0, b"x"), rec(4, b""),
                                        rec(2, b"a", b"b")),
    "submodule_mode": described(rec(5, b"sub", b"x")),
    "odd_mode": described(rec(35, b"m", b"x")),
    "pieces": described(rec(0, b"f", b"z" * 200), pieces=b"\x00\x01\x02\x03"),
}


def git(cwd, *args, stdin=None):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com"] +
                          list(args), cwd=cwd, input=stdin, capture_output=True,
                          check=True).stdout


def raw_pack():
    with tempfile.TemporaryDirectory() as d:
        git(d, "init", "-q")
        os.makedirs(os.path.join(d, "lib"))
        with open(os.path.join(d, "train.py"), "w") as f:
            f.write("print('train')\n")
        with open(os.path.join(d, "lib", "util.py"), "w") as f:
            f.write("X = 1\n")
        os.symlink("../train.py", os.path.join(d, "lib", "link"))
        git(d, "add", "-A")
        tree = git(d, "write-tree").decode().strip()
        # A tree's objects: ls-tree -r -t lists subtrees and blobs.
        listed = git(d, "ls-tree", "-r", "-t", tree).decode().split("\n")
        ids = [tree] + [line.split()[2] for line in listed if line]
        pack = git(d, "pack-objects", "--stdout", stdin=("\n".join(ids) + "\n").encode())
        return b"\x00" + bytes.fromhex(tree) + pack


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    pack = raw_pack()
    with open(os.path.join(OUT, "raw_pack"), "wb") as f:
        f.write(pack)
    # The same pack cut short, and with its checksum damaged.
    with open(os.path.join(OUT, "raw_pack_truncated"), "wb") as f:
        f.write(pack[:len(pack) // 2])
    with open(os.path.join(OUT, "raw_pack_bad_checksum"), "wb") as f:
        f.write(pack[:-1] + bytes([pack[-1] ^ 1]))


if __name__ == "__main__":
    main()
