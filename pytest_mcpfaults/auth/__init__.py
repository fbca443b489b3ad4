"""The ``auth=`` authorization server, dynamic client registration, and what a client did after a refusal."""
