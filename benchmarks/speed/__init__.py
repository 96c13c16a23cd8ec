"""Speed and cost: the op and training steps on the CPU, Forecaster.predict latency, the study
runner's executors, the Triton kernel on a GPU (``gpu_check.sh``) and its machine code without one.
Each module runs with ``python -m benchmarks.speed.<name>``."""
