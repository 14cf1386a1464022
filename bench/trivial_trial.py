"""Benchmark trial for bench/runner_bench.py: does no work, reports one validation (a
fixed function of its hyperparameter `x`) and exits. Under cairn it speaks the control
protocol; standalone (no CAIRN_CONTROL) the SDK prints the validation on stderr as
"cairn: step 1 validation: val_loss=...", which the Optuna driver parses."""
import cairn

ctx = cairn.init()
x = float(ctx.hparams.get("x", 0.5))
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": (x - 0.3) ** 2})
