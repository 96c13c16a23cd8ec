"""The synthetic control: smooth series whose sampling may follow the signal, where continuous
attention's time weights should matter most; ``python -m benchmarks.synthetic``. Design and
pre-registered predictions: ``benchmarks/results/synthetic_control_design.md``."""
