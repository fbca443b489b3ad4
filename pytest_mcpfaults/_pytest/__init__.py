"""pytest glue, one module per concern. Nothing here is public API."""
