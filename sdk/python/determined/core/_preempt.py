"""PreemptContext: should_preempt() is True once cairn asked the trial to stop (`cairn
pause`, Ctrl-C, a searcher's early stop at a rung, the coordinator going away). The
script checkpoints and exits 0; cairn resumes it from that checkpoint."""

import enum


class PreemptMode(enum.Enum):
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class PreemptContext:
    def __init__(self, cairn_context, distributed, mode=PreemptMode.WorkersAskChief):
        self._ctx = cairn_context
        self._dist = distributed
        self._mode = PreemptMode(mode)
        if distributed.size > 1 and self._mode != PreemptMode.WorkersAskChief:
            raise NotImplementedError(
                "preempt_mode %s with several ranks: cairn decides preemption for all ranks at "
                "once, so only WorkersAskChief is supported (docs/determined.md)" %
                self._mode.name)

    def should_preempt(self, auto_ack=True):
        """With several ranks every rank must call it in step (WorkersAskChief): the
        answer is agreed and the same on all of them."""
        if self._dist.size > 1:
            self._ctx.barrier()
        return bool(self._ctx.should_preempt())

    def acknowledge_preemption_signal(self):
        pass  # cairn needs no acknowledgement: exiting 0 after a stop request is a pause
