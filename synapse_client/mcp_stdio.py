"""``synapse-mcp``: the Synapse MCP tools over stdio, for agents on any machine."""

import argparse
import sys
from contextlib import nullcontext, suppress

import anyio

from synapse_client.rest import ConfigurationError, SynapseClient
from synapse_client.tools import build_server

USAGE = """\
Serve the Synapse MCP tools over stdio (start it from an MCP client's configuration).

environment:
  SYNAPSE_URL        the Synapse server (default http://127.0.0.1:8000)
  SYNAPSE_MIND_KEY   a Mind Key (mk_...) of the mind to use (required)
"""


async def serve(client: SynapseClient) -> None:
    async with client:
        server = build_server(lambda _ctx: nullcontext(client))
        await server.run_stdio_async()


def main(argv: list[str] | None = None) -> None:
    """Serve the server at ``SYNAPSE_URL`` with ``SYNAPSE_MIND_KEY``, through its REST API.

    It needs no database and no Django. Protocol messages go to stdout; everything else
    (a configuration error, say) to stderr.
    """
    parser = argparse.ArgumentParser(prog="synapse-mcp", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    try:
        client = SynapseClient.from_env()
    except ConfigurationError as error:
        print(f"synapse-mcp: {error}", file=sys.stderr)
        sys.exit(1)
    with suppress(KeyboardInterrupt):
        anyio.run(serve, client)


if __name__ == "__main__":
    main()
