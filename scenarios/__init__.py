"""Scenario files bundled with the package (``rrsi.scenarios``)."""
