// The official TypeScript MCP SDK client on each part of the MCP surface a harness meets beyond a plain
// tool call: cancellation, server requests, resumption, auth and progress. tests/test_ts_parts.py runs it
// against a pytest-mcpfaults Sidecar and asserts what this client saw (the JSON line) and what the
// sidecar journaled.
//
//   node parts.mjs cancel|elicit|resume|auth|progress '<json options>'
//
//   cancel   {how: "timeout"|"abort", timeout_ms}: sleep 5 s, given up at the SDK's request timeout
//            (`timeout`) or by an AbortSignal (`signal`) after timeout_ms
//   elicit   {handler: "answer"|"never"|"none", timeout_ms}: ask_user, with an elicitation handler that
//            answers, one that never resolves, or no elicitation capability at all
//   resume   {timeout_ms}: echo, answered through a stream the server may close (close_stream)
//   auth     {provider: "client_credentials"|"static", issuer, scope, token, timeout_ms}: echo twice,
//            with the SDK's ClientCredentialsProvider (for `issuer`, configured with `scope` if given) or
//            a fixed bearer `token`
//   progress {arguments, timeout_ms, reset, max_total_ms}: the `progress` tool with an onprogress
//            callback, with or without `resetTimeoutOnProgress` (and its `maxTotalTimeout`)
//
// Every mode then ends the session with terminateSession() (bounded), and closes the client. Options
// of every mode: settle_ms (let the event loop run that long before terminateSession()) and
// end: "close" (close the client without terminating the session).
//
// Environment: MCPFAULTS_MCP_URL; MCPFAULTS_TS_WAIT_MS bounds every other wait (connect, DELETE;
// default 2000). Prints one JSON line on stdout: what each step did, the progress and resumption tokens
// it saw, and its session.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const WAIT_MS = Number(process.env.MCPFAULTS_TS_WAIT_MS ?? 2000);
// Each mode's options (and those of every mode: settle_ms, end).
const OPTIONS = {
  cancel: ["how", "timeout_ms"],
  elicit: ["handler", "timeout_ms"],
  resume: ["timeout_ms"],
  auth: ["provider", "issuer", "scope", "token", "timeout_ms"],
  progress: ["arguments", "timeout_ms", "reset", "max_total_ms"],
};
const MODES = Object.keys(OPTIONS);

// terminateSession() has no timeout of its own: the DELETE is bounded here. POSTs are not: their
// answer streams must live as long as the request's own timeout, which is what is measured.
function boundedDelete(url, init = {}) {
  if (init.method !== "DELETE") return fetch(url, init);
  const signals = [AbortSignal.timeout(WAIT_MS), ...(init.signal ? [init.signal] : [])];
  return fetch(url, { ...init, signal: AbortSignal.any(signals) });
}

function describe(err) {
  const cause = err?.cause?.code ?? err?.cause?.message;
  return `${err?.name ?? "Error"}: ${err?.message ?? String(err)}${cause ? ` (${cause})` : ""}`;
}

const t0 = performance.now();
const since = () => Math.round(performance.now() - t0);
const out = { steps: [], progress: [], resumption_tokens: [], errors: [] };

// A step's outcome: `at` when it started and `ms` how long it took (the `at` of the progress and
// resumption tokens it saw, and of the errors the client reported, are on the same clock).
async function step(name, body) {
  const at = since();
  try {
    const value = await body();
    out.steps.push({ step: name, ok: true, value: value ?? null, at, ms: since() - at });
    return value;
  } catch (err) {
    out.steps.push({ step: name, ok: false, error: describe(err), code: err?.code ?? null, at, ms: since() - at });
    return undefined;
  }
}

function transportFor(mode, opts) {
  const init = { fetch: boundedDelete };
  if (mode === "auth" && opts.provider === "client_credentials") {
    init.authProvider = new ClientCredentialsProvider({
      clientId: "ts-parts", clientSecret: "s", expectedIssuer: opts.issuer, scope: opts.scope,
    });
  } else if (mode === "auth") {
    init.requestInit = { headers: { Authorization: `Bearer ${opts.token}` } };
  }
  return new StreamableHTTPClientTransport(new URL(process.env.MCPFAULTS_MCP_URL), init);
}

function clientFor(mode, opts) {
  const handler = mode === "elicit" ? opts.handler : "none";
  const capabilities = handler === "none" ? {} : { elicitation: { form: {} } };
  const client = new Client({ name: "mcpfaults-ts-parts", version: "1.0.0" }, { capabilities });
  if (handler === "answer") {
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { answer: "yes" } }));
  } else if (handler === "never") {
    client.setRequestHandler(ElicitRequestSchema, () => new Promise(() => {})); // a UI that never comes back
  }
  client.onerror = (err) => out.errors.push({ at: since(), error: describe(err) });
  return client;
}

// A tool's text, or the tool's error as {is_error, text}.
function text(result) {
  const body = result.content?.[0]?.text ?? null;
  return result.isError ? { is_error: true, text: body } : body;
}

async function run(mode, opts, client) {
  const timeout = opts.timeout_ms ?? WAIT_MS;
  const call = (name, args, extra = {}) => client.callTool({ name, arguments: args }, undefined, { timeout, ...extra })
    .then(text);
  if (mode === "cancel") {
    const extra = opts.how === "abort" ? { signal: AbortSignal.timeout(timeout), timeout: 60_000 } : {};
    await step("tools/call sleep", () => call("sleep", { seconds: 5 }, extra));
  } else if (mode === "elicit") {
    await step("tools/call ask_user", () => call("ask_user", { message: "Delete the branch?" }));
  } else if (mode === "resume") {
    const onresumptiontoken = (token) => out.resumption_tokens.push({ at: since(), token });
    await step("tools/call echo", () => call("echo", { text: "resumed" }, { onresumptiontoken }));
  } else if (mode === "auth") {
    await step("tools/call echo one", () => call("echo", { text: "one" }));
    await step("tools/call echo two", () => call("echo", { text: "two" }));
  } else if (mode === "progress") {
    const onprogress = (p) => out.progress.push({ at: since(), progress: p.progress, total: p.total ?? null });
    await step("tools/call progress", () => call("progress", opts.arguments,
      { onprogress, resetTimeoutOnProgress: Boolean(opts.reset), maxTotalTimeout: opts.max_total_ms }));
  }
}

async function main(mode, opts) {
  out.mode = mode;
  const transport = transportFor(mode, opts);
  const client = clientFor(mode, opts);
  const connected = await step("connect", () => client.connect(transport, { timeout: WAIT_MS }).then(() => true));
  out.session_id = transport.sessionId ?? null;
  out.protocol_version = transport.protocolVersion ?? null;
  if (connected) {
    await run(mode, opts, client);
    // settle_ms: let the event loop run that long first (a cancel the SDK sent without awaiting it
    // goes out meanwhile); end "close": close the client without terminating the session.
    if (opts.settle_ms !== undefined) await new Promise((resolve) => setTimeout(resolve, opts.settle_ms));
    if (opts.end !== "close") await step("terminateSession", () => transport.terminateSession());
  }
  await client.close().catch(() => {});
  out.ms = since();
  process.stdout.write(JSON.stringify(out) + "\n");
}

const [mode, raw = "{}"] = process.argv.slice(2);
if (!MODES.includes(mode)) {
  process.stderr.write(`usage: node parts.mjs ${MODES.join("|")} '<json>' (got ${JSON.stringify(mode)})\n`);
  process.exit(2);
}
if (!process.env.MCPFAULTS_MCP_URL) {
  process.stderr.write("parts.mjs: MCPFAULTS_MCP_URL is not set\n");
  process.exit(2);
}
const opts = JSON.parse(raw);
const unknown = Object.keys(opts).filter((k) => ![...OPTIONS[mode], "settle_ms", "end"].includes(k));
if (unknown.length) {
  process.stderr.write(`parts.mjs ${mode}: unknown option(s) ${unknown.join(", ")}; valid: ` +
    `${[...OPTIONS[mode], "settle_ms", "end"].join(", ")}\n`);
  process.exit(2);
}
await main(mode, opts);
process.exit(0); // a handler that never resolves must not keep the process alive
