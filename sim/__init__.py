"""The scenario simulator: simulated executors, the one walk of a task through a scenario's
pipeline (:mod:`rrsi.sim.pipeline`), and synthetic datasets for the attribution GNN and the
LM Reflector."""
