"""pytest-mcpfaults: test agent harnesses against fault-injected MCP sidecars."""

from __future__ import annotations

__all__: list[str] = []
