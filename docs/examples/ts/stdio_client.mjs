// The TypeScript MCP SDK's StdioClientTransport against a pytest-mcpfaults stdio server.
// Usage: node stdio_client.mjs '<json: {"command", "args", "env"}>'  (tests/test_stdio_interop.py runs it)
// Prints one JSON line: what the tool call returned (or the error) and how long close() took.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const server = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({ command: server.command, args: server.args, env: server.env });
const client = new Client({ name: "ts-stdio-example", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  const result = await client.callTool({ name: "echo", arguments: { text: "from node" } }, undefined, {
    timeout: 3000,
  });
  out.text = result.content[0].text;
} catch (err) {
  out.error = `${err.name}: ${err.message}`;
}
const started = Date.now();
await client.close();
out.close_ms = Date.now() - started;
console.log(JSON.stringify(out));
