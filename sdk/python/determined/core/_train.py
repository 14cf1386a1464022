"""TrainContext: metrics go to cairn as training and validation reports (rank 0's are
recorded, as in Determined where only the chief's count)."""

import enum
import logging
import sys

logger = logging.getLogger("determined.core")


class EarlyExitReason(enum.Enum):
    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"


class TrainContext:
    def __init__(self, cairn_context, distributed, state):
        self._ctx = cairn_context
        self._dist = distributed
        self._state = state  # shared with the searcher and checkpoint contexts

    def set_status(self, status):
        logger.info("status: %s", status)

    def report_training_metrics(self, steps_completed, metrics, batch_metrics=None):
        self._state.last_step = max(self._state.last_step, int(steps_completed))
        self._ctx.report_training(int(steps_completed), _numbers(metrics))

    def report_validation_metrics(self, steps_completed, metrics):
        step = int(steps_completed)
        self._state.last_step = max(self._state.last_step, step)
        values = _numbers(metrics)
        self._state.validations[step] = dict(values)
        self._ctx.report_validation(step, values)

    def report_metrics(self, group, steps_completed, metrics):
        """"training" and "validation" are cairn's two series; any other group is recorded
        with the training reports, each name prefixed with "<group>/"."""
        if "." in group:
            raise ValueError("group cannot contain a '.' character: %r" % group)
        if group == "training":
            return self.report_training_metrics(steps_completed, metrics)
        if group == "validation":
            return self.report_validation_metrics(steps_completed, metrics)
        prefixed = {"%s/%s" % (group, name): value for name, value in metrics.items()}
        self._state.last_step = max(self._state.last_step, int(steps_completed))
        self._ctx.report_training(int(steps_completed), _numbers(prefixed))

    def report_progress(self, progress):
        """Checked as Determined checks it; cairn computes progress from the steps."""
        if progress < 0 or progress > 1:
            raise ValueError("Progress should be between 0 and 1, not %s" % progress)
        self._state.progress = float(progress)

    def report_early_exit(self, reason):
        logger.warning("report_early_exit(%s): cairn ends the trial when the script exits "
                       "(docs/determined.md)", reason)

    def get_experiment_best_validation(self):
        """The best value of searcher.metric validated so far by any trial of the
        experiment (searcher.smaller_is_better decides), or None."""
        return self._ctx.experiment_best_validation()

    def get_tensorboard_path(self):
        raise NotImplementedError("TensorBoard is not supported by cairn (docs/determined.md)")

    def upload_tensorboard_files(self, *args, **kwargs):
        raise NotImplementedError("TensorBoard is not supported by cairn (docs/determined.md)")


def _numbers(metrics):
    """Determined accepts any JSON value in metrics; cairn records numbers. Values that are
    not numbers (strings, lists, nested dicts) are left out with one warning each."""
    out = {}
    for name, value in metrics.items():
        if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
            continue
        try:
            if isinstance(value, (str, bytes, bool, list, tuple, dict)):
                raise TypeError
            out[name] = float(value)  # NumPy scalars, 0-d tensors
        except (TypeError, ValueError):
            sys.stderr.write("determined: metric %r is not a number (%s); not recorded\n" %
                             (name, type(value).__name__))
    return out
