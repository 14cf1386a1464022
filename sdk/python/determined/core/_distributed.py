"""DistributedContext: the ranks of a trial and small collectives between them, over
cairn's rendezvous table (cairn.Context.kv_set/kv_get) and barriers.

Every collective is one round: each rank that contributes publishes its pickled value
under a key of the round's slot, all ranks meet in a barrier, then each reads what it
needs. Keys are reused every second round (cairn keeps at most 4,096 keys per attempt):
a rank writes round r+2's keys only after the barrier of round r+1, which every rank
enters only once it has read round r's values, so nobody reads a value of another round.
"""

import base64
import os
import pickle

import cairn

# Values are cut into pieces that fit cairn's 64 KiB per value once base64-encoded.
_CHUNK = 45 * 1024


def _env_int(name, default):
    text = os.environ.get(name, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        return default


class DistributedContext:
    """Determined's DistributedContext. cairn starts one process per rank, on this machine
    or spread over agents (docs/peers.md): cross_rank/cross_size are the machine's number
    and the machine count (torchrun's GROUP_RANK/GROUP_WORLD_SIZE, which cairn sets)."""

    def __init__(self, *, rank, size, local_rank, local_size, cross_rank, cross_size,
                 chief_ip=None, pub_port=None, pull_port=None, port_offset=0,
                 force_tcp=False):
        if not 0 <= rank < size:
            raise ValueError("rank %d is not in [0, %d)" % (rank, size))
        machines = max(1, _env_int("GROUP_WORLD_SIZE", 1))
        if os.environ.get("CAIRN_CONTROL") and cross_size != machines:
            raise ValueError("cross_size %d differs from the %d machine(s) cairn placed the "
                             "trial's ranks on (GROUP_WORLD_SIZE)" % (cross_size, machines))
        cairn_size = max(1, _env_int("WORLD_SIZE", 1))
        if os.environ.get("CAIRN_CONTROL") and size != cairn_size:
            raise ValueError("size %d differs from the trial's %d ranks (resources."
                             "slots_per_trial): cairn starts one process per rank" %
                             (size, cairn_size))
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self._chief_ip = chief_ip
        self._round = 0

    @classmethod
    def from_torch_distributed(cls, chief_ip=None):
        """From torchrun's variables, which cairn sets for every rank."""
        return cls(rank=_env_int("RANK", 0), size=_env_int("WORLD_SIZE", 1),
                   local_rank=_env_int("LOCAL_RANK", 0),
                   local_size=_env_int("LOCAL_WORLD_SIZE", _env_int("WORLD_SIZE", 1)),
                   cross_rank=_env_int("GROUP_RANK", 0),
                   cross_size=_env_int("GROUP_WORLD_SIZE", 1),
                   chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"))

    @classmethod
    def from_horovod(cls, hvd, chief_ip=None):
        raise NotImplementedError("Horovod is not supported by cairn (docs/determined.md)")

    @classmethod
    def from_deepspeed(cls, chief_ip=None):
        return cls.from_torch_distributed(chief_ip)  # DeepSpeed sets torchrun's variables

    def close(self):
        pass

    def get_rank(self):
        return self.rank

    def get_local_rank(self):
        return self.local_rank

    def get_size(self):
        return self.size

    def get_local_size(self):
        return self.local_size

    def get_cross_rank(self):
        return self.cross_rank

    def get_cross_size(self):
        return self.cross_size

    def get_num_agents(self):
        return self.cross_size

    # -- collectives --

    def allgather(self, stuff):
        """Every rank's ``stuff`` (picklable), in rank order, on every rank."""
        if self.size == 1:
            return [stuff]
        return self._round_trip(stuff, publish=True, read=range(self.size))

    def gather(self, stuff):
        """Every rank's ``stuff`` in rank order on the chief; None elsewhere."""
        if self.size == 1:
            return [stuff]
        got = self._round_trip(stuff, publish=True,
                               read=range(self.size) if self.rank == 0 else ())
        return got if self.rank == 0 else None

    def broadcast(self, stuff=None):
        """The chief's ``stuff`` on every rank."""
        if self.size == 1:
            return stuff
        return self._round_trip(stuff, publish=self.rank == 0, read=(0,))[0]

    # One machine: the local collectives are the global ones.
    def allgather_local(self, stuff):
        return self.allgather(stuff)

    def gather_local(self, stuff):
        return self.gather(stuff)

    def broadcast_local(self, stuff=None):
        return self.broadcast(stuff)

    def _round_trip(self, stuff, publish, read):
        ctx = cairn.init()
        number = self._round
        self._round += 1
        slot = number % 2
        if publish:
            text = base64.b64encode(pickle.dumps(stuff, protocol=4)).decode("ascii")
            pieces = [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
            for i in range(1, len(pieces)):
                ctx.kv_set("det/%d/%d/%d" % (slot, self.rank, i), pieces[i])
            ctx.kv_set("det/%d/%d" % (slot, self.rank),
                       "%d:%d:%s" % (number, len(pieces), pieces[0]))
        ctx.barrier()
        values = []
        for rank in read:
            head = ctx.kv_get("det/%d/%d" % (slot, rank))
            tag, count, first = head.split(":", 2)
            if int(tag) != number:  # cannot happen while every rank makes the same calls
                raise RuntimeError("determined: rank %d is at another collective (%s) than "
                                   "rank %d (%d): every rank must make the same calls in the "
                                   "same order" % (rank, tag, self.rank, number))
            pieces = [first] + [ctx.kv_get("det/%d/%d/%d" % (slot, rank, i))
                                for i in range(1, int(count))]
            values.append(pickle.loads(base64.b64decode("".join(pieces))))
        return values


class DummyDistributedContext(DistributedContext):
    """One rank alone."""

    def __init__(self):
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0,
                         cross_size=1)


def from_environment():
    """The trial's ranks as cairn started them: used when a script passes no
    DistributedContext to core.init()."""
    if _env_int("WORLD_SIZE", 1) <= 1:
        return DummyDistributedContext()
    return DistributedContext.from_torch_distributed()
