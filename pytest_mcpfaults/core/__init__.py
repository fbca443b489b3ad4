"""``SidecarCore.decide``, the one place a request is answered, transport-free; routing, the journal and
its records, cancellation and resumption bookkeeping, the errors and the bounded await."""
