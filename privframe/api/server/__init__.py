"""``privframe serve``: a service beside the data that analysts query with the same API.

The data owner describes the datasets in a TOML configuration
(:mod:`privframe.api.server.config`) and manages analysts, tokens and budgets
in the server's database with ``privframe admin``
(:mod:`privframe.api.server.admin`); the service
(:mod:`privframe.api.server.app`) rebuilds each analyst's plan through the
same checks as a local query and charges it to that analyst's budget on that
dataset. Analysts connect with :func:`privframe.connect`
(:mod:`privframe.api.client`). ``docs/server.md`` covers deployment and the
threat model. The web stack is the ``[server]`` extra: importing this package
needs none of it.

Example:
    >>> from privframe.api.server import config
    >>> config.DEFAULT_PORT
    8765
"""
