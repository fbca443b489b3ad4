"""Sidecar fixtures (placeholder)."""
