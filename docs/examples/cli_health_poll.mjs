// A runner that polls /health before dispatching work, tested against a sidecar whose /health hangs.
// Node 18+ (global fetch, AbortSignal.timeout); the TypeScript version only adds type annotations.
// Run by tests/test_cli.py: `PYTHON=/path/to/python node docs/examples/cli_health_poll.mjs`.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import assert from "node:assert/strict";

// --8<-- [start:wait]
/** The code under test: never wait on one probe longer than probeMs, nor on all of them longer than deadlineMs. */
export async function waitHealthy(url, { probeMs = 500, deadlineMs = 10_000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + deadlineMs;
  let probes = 0;
  while (Date.now() < deadline) {
    probes += 1;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(probeMs) });
      if (res.ok) return probes;
    } catch {
      // timed out (a hung /health) or refused (not listening yet): probe again
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(`${url} not healthy after ${probes} probes`);
}
// --8<-- [end:wait]

// --8<-- [start:start]
/** Start `python -m pytest_mcpfaults serve --json ...`; resolve with the child and its start-up info. */
async function startSidecar(...args) {
  const python = process.env.PYTHON ?? "python3";
  const child = spawn(python, ["-m", "pytest_mcpfaults", "serve", "--json", ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout });
  let timer;
  const [line] = await Promise.race([
    once(lines, "line"),
    once(child, "exit").then(([code]) => Promise.reject(new Error(`serve exited with ${code}`))),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("serve did not start in 30 s")), 30_000);
    }),
  ]).finally(() => clearTimeout(timer)); // an uncleared timer keeps node alive for the full 30 s
  return { child, info: JSON.parse(line) }; // {url, mcp_url, health_url, control_url, control_token, faults}
}
// --8<-- [end:start]

// --8<-- [start:test]
const { child, info } = await startSidecar("--fault", "hang@health[times=2]", "--patience", "20");
try {
  const probes = await waitHealthy(info.health_url, { probeMs: 1000 });
  assert.ok(probes >= 3); // two probes hung and were abandoned; a later one got 200

  // What the sidecar saw: the runner closed both hung probes itself (nobody released them).
  const auth = { Authorization: `Bearer ${info.control_token}` };
  let journal;
  for (const until = Date.now() + 10_000; Date.now() < until; ) {
    journal = await (await fetch(`${info.control_url}/journal`, { headers: auth })).json();
    if (journal.requests.filter((r) => r.held?.outcome === "client_closed").length === 2) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const held = journal.requests.filter((r) => r.held);
  assert.deepEqual(held.map((r) => [r.path, r.held.outcome]), [["/health", "client_closed"], ["/health", "client_closed"]]);
  assert.equal(journal.requests.at(-1).status, 200);
  assert.deepEqual(journal.fired, { hang: 2 });
} finally {
  child.kill("SIGTERM");
}
const [code] = await once(child, "exit");
assert.equal(code, 0);
// --8<-- [end:test]
console.log("health polling recipe: ok");
