"""SearcherContext: Determined's pre-0.38 search model over cairn's operations.

operations() yields cairn's operations ("train until length units"); op.report_completed
(metric) is the validation at op.length that the searcher decides on. Lengths and the
steps_completed of reports must be in one unit (cairn's searcher.length_unit)."""

import enum
import math
import os
import warnings


class Unit(enum.Enum):
    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherMode(enum.Enum):
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHEIF_ONLY"  # sic: Determined's own value


class SearcherOperation:
    def __init__(self, context, length, is_chief):
        self._context = context
        self._length = int(length)
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self):
        return self._length

    def report_progress(self, length):
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_progress() from the chief worker")
        if self._completed and length != self._length:
            raise RuntimeError("you must not call op.report_progress() after "
                               "op.report_completed()")
        self._context._state.progress = min(1.0, max(0.0, float(length) / self._length))

    def report_completed(self, searcher_metric):
        """Tells the searcher the metric at op.length: the validation at that step gets it
        (merged into a validation already reported there, else reported alone)."""
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_completed() from the chief worker")
        if self._completed:
            raise RuntimeError("you may only call op.report_completed() once")
        if isinstance(searcher_metric, bool) or not isinstance(searcher_metric, (int, float)):
            try:
                searcher_metric = float(searcher_metric)
            except (TypeError, ValueError):
                raise TypeError("searcher_metric must be a number, got %s" %
                                type(searcher_metric).__name__) from None
        if math.isnan(searcher_metric):
            raise RuntimeError("searcher_metric may not be NaN")
        self._completed = True
        metric = os.environ.get("CAIRN_SEARCHER_METRIC", "") or "searcher_metric"
        state = self._context._state
        earlier = state.validations.get(self._length)
        if earlier is not None and earlier.get(metric) == searcher_metric:
            return  # the script already reported it at this step
        values = dict(earlier or {})
        values[metric] = searcher_metric
        state.validations[self._length] = values
        self._context._ctx.report_validation(self._length, values)


class SearcherContext:
    def __init__(self, cairn_context, distributed, state):
        self._ctx = cairn_context
        self._dist = distributed
        self._state = state

    def operations(self, searcher_mode=SearcherMode.WorkersAskChief, auto_ack=True):
        warnings.warn("SearcherContext.operations() was deprecated in Determined 0.38.0; cairn "
                      "keeps it (docs/determined.md)", FutureWarning, stacklevel=2)
        SearcherMode(searcher_mode)
        if self._dist.rank != 0 and SearcherMode(searcher_mode) == SearcherMode.ChiefOnly:
            raise RuntimeError("SearcherMode.ChiefOnly: only the chief may call operations()")
        for op in self._ctx.operations():
            yield SearcherOperation(self, op.length, self._dist.rank == 0)

    def acknowledge_out_of_ops(self):
        pass

    def get_configured_units(self):
        return None
