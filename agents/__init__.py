"""Agent harnesses: Executor → Reflector → Updater, hosted as Ray actors."""
