"""Span fixtures and gate (placeholder)."""
