"""``synapse-mcp``: the Synapse MCP tools over stdio, for agents on any machine."""

import argparse
import os
import sys
from contextlib import asynccontextmanager, suppress

import anyio

from synapse_client.provenance import ProvenanceError, agent_name_from
from synapse_client.rest import ConfigurationError, SynapseClient
from synapse_client.tools import build_server

USAGE = """\
Serve the Synapse MCP tools over stdio (start it from an MCP client's configuration).

environment:
  SYNAPSE_URL        the Synapse server (default http://127.0.0.1:8000)
  SYNAPSE_MIND_KEY   a Mind Key (mk_...) of the mind to use (required)
  SYNAPSE_AGENT      the agent's name sent as X-Synapse-Agent (default: the MCP client's
                     name from its handshake, else synapse-mcp)
  SYNAPSE_AGENT_INSTANCE_ID
                     this installation's id, X-Synapse-Agent-Instance (default: made once
                     and kept in $SYNAPSE_CONFIG_DIR, ~/.config/synapse by default)
  SYNAPSE_DEVICE     X-Synapse-Device (default "<host>; <OS> <release>; synapse-mcp/<version>";
                     empty: none)
"""
PROGRAM = "synapse-mcp"


def client_name(ctx) -> str | None:
    """The MCP client's name from its initialize handshake, made to fit X-Synapse-Agent."""
    try:
        return agent_name_from(ctx.session.client_params.client_info.name)
    except AttributeError:  # no handshake parameters, or no client info in them
        return None


async def serve(client: SynapseClient, *, agent_from_handshake: bool = True) -> None:
    """Serve the tools over stdio with ``client``; unless ``SYNAPSE_AGENT`` named the
    agent, the first tool call names it after the MCP client (``claude-code``)."""
    named = not agent_from_handshake

    @asynccontextmanager
    async def client_for(ctx):
        nonlocal named
        if not named:
            named = True
            name = client_name(ctx)
            if name:
                client.use_agent(name)
        yield client

    async with client:
        server = build_server(client_for)
        await server.run_stdio_async()


def main(argv: list[str] | None = None) -> None:
    """Serve the server at ``SYNAPSE_URL`` with ``SYNAPSE_MIND_KEY``, through its REST API.

    It needs no database and no Django. Protocol messages go to stdout; everything else
    (a configuration error, say) to stderr.
    """
    parser = argparse.ArgumentParser(prog=PROGRAM, description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    try:
        client = SynapseClient.from_env(program=PROGRAM)
    except (ConfigurationError, ProvenanceError) as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        sys.exit(1)
    with suppress(KeyboardInterrupt):
        anyio.run(lambda: serve(client, agent_from_handshake=not os.environ.get(
            "SYNAPSE_AGENT")))


if __name__ == "__main__":
    main()
