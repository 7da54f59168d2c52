"""Shared fixtures: real servers come from the project's pytest plugin."""

pytest_plugins = ["framework.testing"]
