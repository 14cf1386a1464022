"""A stand-in for cairn's side of the control protocol (docs/protocol.md), small enough
to script: it unit-tests the SDKs' protocol side. The real coordinator is tested by the
end-to-end tests that drive the cairn binary.

    with FakeControl(tmp, operations=[3, 5]) as fake:
        env["CAIRN_CONTROL"] = fake.address
        ... run a trial ...
        fake.wait_for(lambda: fake.of_type("validation"))

Every message a trial sends is recorded in ``fake.messages`` as (connection, message).
``on_message(fake, connection, message)`` runs before the default answer; returning
True skips that answer (for instance after closing the connection to simulate a cairn
that died). ``die_after_training_step=S`` plays a cairn killed right after it read the
training batch holding step S: the batch is recorded, nothing after it is answered.
"""

import json
import os
import pathlib
import shutil
import socket
import threading
import time


class Connection:
    def __init__(self, sock, index):
        self.sock = sock
        self.index = index
        self.lock = threading.Lock()
        self.closed = False

    def send(self, message):
        with self.lock:
            if self.closed:
                return
            try:
                self.sock.sendall((json.dumps(message) + "\n").encode())
            except OSError:
                pass

    def close(self):
        with self.lock:
            if not self.closed:
                self.closed = True
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.sock.close()


class FakeControl:
    def __init__(self, directory, operations=(), checkpoint_period=1, deterministic=None,
                 on_message=None, fail_checkpoint_end=False, reject_validation=False,
                 die_after_training_step=None):
        self.directory = pathlib.Path(directory)
        self.operations = list(operations)
        self.checkpoint_period = checkpoint_period
        self.deterministic = deterministic
        self.on_message = on_message
        self.fail_checkpoint_end = fail_checkpoint_end
        self.reject_validation = reject_validation
        self.die_after_training_step = die_after_training_step
        self.sync_stop = None  # a reason: `sync` answers tell every rank to stop
        self.knows_sync = True  # False: answer `sync` like a cairn that predates it
        self.knows_skip = True  # False: answer `checkpoint_skip` like a cairn that predates it
        self.messages = []
        self.connections = []
        self.staging_dirs = []
        self.committed = {}  # checkpoint id -> staging path
        self._changed = threading.Condition()
        self._socket_path = self.directory / "control.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self._socket_path))
        self._listener.listen(8)
        self.address = "unix:" + str(self._socket_path)
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self._listener.close()
        except OSError:
            pass
        for connection in list(self.connections):
            connection.close()

    # -- inspection --

    def of_type(self, kind):
        with self._changed:
            return [m for _, m in self.messages if m.get("type") == kind]

    def types(self):
        with self._changed:
            return [m.get("type") for _, m in self.messages]

    def training_reports(self):
        return [r for m in self.of_type("training") for r in m["reports"]]

    def wait_for(self, predicate, timeout=30.0):
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate_value(predicate)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("condition not met within %.0fs; messages: %s" %
                                         (timeout, [m for _, m in self.messages][-20:]))
                self._changed.wait(min(left, 0.5))

    # -- serving --

    def _accept(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            connection = Connection(sock, len(self.connections))
            self.connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection):
        buffer = b""
        while True:
            try:
                data = connection.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                connection.closed = True
                with self._changed:
                    self._changed.notify_all()
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                with self._changed:
                    self.messages.append((connection, message))
                    self._changed.notify_all()
                if self.on_message is not None and self.on_message(self, connection, message):
                    continue
                if self._dies_at(message):
                    connection.close()
                    with self._changed:
                        self._changed.notify_all()
                    return
                self._answer(connection, message)

    def _dies_at(self, message):
        if self.die_after_training_step is None or message.get("type") != "training":
            return False
        return any(r["step"] >= self.die_after_training_step for r in message["reports"])

    def _answer(self, connection, message):
        kind = message.get("type")
        seq = message.get("seq")
        if kind == "hello":
            if message.get("protocol") != 1:
                connection.send({"type": "error", "message": "protocol 1 only"})
                connection.close()
                return
            welcome = {"type": "welcome", "protocol": 1,
                       "checkpoint_period": self.checkpoint_period, "future_field": [1, 2]}
            if self.deterministic is not None:
                welcome["deterministic"] = self.deterministic
            connection.send(welcome)
        elif kind == "next_operation":
            if self.operations:
                connection.send({"type": "operation", "re": seq,
                                 "length": self.operations.pop(0)})
            else:
                connection.send({"type": "operation", "re": seq, "done": True})
        elif kind == "validation":
            if self.reject_validation:
                connection.send({"type": "error", "re": seq, "message": "no metric"})
            else:
                connection.send({"type": "ack", "re": seq})
        elif kind == "checkpoint_begin":
            path = self.directory / "staging" / str(len(self.staging_dirs))
            path.mkdir(parents=True)
            self.staging_dirs.append(path)
            connection.send({"type": "checkpoint_dir", "re": seq, "path": str(path)})
        elif kind == "checkpoint_end":
            if self.fail_checkpoint_end:
                connection.send({"type": "error", "re": seq, "message": "disk full"})
                return
            checkpoint_id = "fake%d" % len(self.committed)
            self.committed[checkpoint_id] = message["path"]
            connection.send({"type": "ack", "re": seq, "checkpoint": checkpoint_id})
        elif kind == "checkpoint_abort":
            shutil.rmtree(message["path"], ignore_errors=True)
        elif kind == "checkpoint_skip":
            if self.knows_skip:
                connection.send({"type": "ack", "re": seq})
            else:
                connection.send({"type": "error", "re": seq, "message": "unknown message type"})
        elif kind == "sync" and not self.knows_sync:
            connection.send({"type": "error", "re": seq, "message": "unknown message type"})
        elif kind == "sync":
            answer = {"type": "sync", "re": seq, "stop": self.sync_stop is not None}
            if self.sync_stop is not None:
                answer["reason"] = self.sync_stop
            connection.send(answer)


def predicate_value(predicate):
    try:
        return predicate()
    except (IndexError, KeyError):
        return None


def socket_directory():
    """A short directory for Unix sockets (their paths are limited to ~100 bytes)."""
    import tempfile
    return tempfile.mkdtemp(prefix="cairn-fake-", dir="/tmp" if os.path.isdir("/tmp") else None)
