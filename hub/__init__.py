"""The reflection hub: incidents, joint reflections, joint regularized updates."""
