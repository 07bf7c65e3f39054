"""The scenario simulator: simulated executors, one ``run_trace``, synthetic datasets."""
