"""Synapse clients for agents and shells: REST client, MCP tools, the `synapse` CLI (no Django)."""
