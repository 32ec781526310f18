"""``tether mcp``: the memory for any MCP client, behind the lanes' fences."""
