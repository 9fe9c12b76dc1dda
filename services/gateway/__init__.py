"""The gateway: external bots and spectators reach hosted matches over HTTP, never Redis.

A lobby creates matches and hands out seat tokens; each seat has a stream (NDJSON or SSE) of
what it may see (C8) and a moves endpoint; each match has a public stream for spectators.
The gateway talks to the referee only through the streams: commands go on the partition's
command stream, rejections come back on the gateway's reply stream, and what happened is read
from the partitions' notification logs. See docs/protocol.md.

The code for a URL is in the module of services/gateway/resources/ its prefix names (the table
is that package's docstring); each resource module declares its operations once
(declare.py), and the app's routes (app.py, routing.py) and the OpenAPI document (openapi.py)
are built from those declarations. What the resources share is the ``Gateway``: core.py (its
settings, limits, clients, tokens and stream places) and commands.py (what it sends).
"""
