"""Proxy mode: which requests go upstream, the HTTP and stdio upstreams, the relay and the SSE parser;
``cassette/`` records it and replays it offline."""
