"""Proxy mode: which requests go upstream, the HTTP and stdio upstreams, the relay and the SSE parser,
the HTTP upstream's process (``lifecycle.py``, ``upstream_serve=``) and how each relayed answer ended
(``streams.py``); ``cassette/`` records it and replays it offline."""
