"""The socket sidecar (``Sidecar``, its listener, bytes on the wire, the shared loop thread), legacy
HTTP+SSE, the open event streams and the control API: a new transport goes beside these (``stdio/`` and
``inprocess.py`` are the other two)."""
