"""A cairn stand-in that answers the control protocol (docs/protocol.md) as cheaply as
possible and throws training reports away unparsed. A trial run against it shows what
the SDK alone costs, apart from what cairn's coordinator and store cost.

    with NullControl(directory, length=N) as sink:
        env["CAIRN_CONTROL"] = sink.address   # then run the trial; sink.training_bytes
"""
import json
import os
import socket
import threading

_TRAINING_PREFIX = b'{"type":"training"'


class NullControl:
    def __init__(self, directory, length):
        self.length = length
        self.path = os.path.join(directory, "null-control.sock")
        self.address = "unix:" + self.path
        self.training_bytes = 0
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._listener.close()
        self._thread.join(timeout=10)
        if os.path.exists(self.path):
            os.unlink(self.path)

    def _serve(self):
        try:
            connection, _ = self._listener.accept()
        except OSError:
            return
        with connection:
            self._talk(connection)

    def _talk(self, connection):
        pending = bytearray()
        operations_given = 0
        while True:
            data = connection.recv(1 << 20)
            if not data:
                return
            pending += data
            start = 0
            while True:
                end = pending.find(b"\n", start)
                if end < 0:
                    break
                line = bytes(pending[start:end])
                start = end + 1
                if line.startswith(_TRAINING_PREFIX):
                    self.training_bytes += len(line) + 1
                    continue
                answer, operations_given = self._answer(json.loads(line), operations_given)
                if answer is not None:
                    connection.sendall((json.dumps(answer) + "\n").encode())
            del pending[:start]

    def _answer(self, message, operations_given):
        kind, seq = message.get("type"), message.get("seq")
        if kind == "hello":
            return {"type": "welcome", "protocol": 1, "checkpoint_period": self.length,
                    "deterministic": False}, operations_given
        if kind == "next_operation":
            if operations_given:
                return {"type": "operation", "re": seq, "done": True}, operations_given
            return {"type": "operation", "re": seq, "length": self.length}, 1
        if kind == "validation":
            return {"type": "ack", "re": seq}, operations_given
        if seq is not None:
            return {"type": "error", "re": seq, "message": "not in this benchmark"}, \
                operations_given
        return None, operations_given
