"""Shared fixtures for the whole suite."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# CI runs on two cores; keep property tests thorough but bounded, and never time-dependent.
settings.register_profile(
    "josefk",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("josefk")
