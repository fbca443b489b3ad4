"""The MCP protocol in both eras: the endpoint, tools and their schemas, the server surface (resources,
prompts, URI templates), server-to-client requests, sync tool calls, conformance fixtures."""
