"""Dependency graphs, incident graphs and root-cause attribution."""
