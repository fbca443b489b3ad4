// A benchmark-session harness on the official TypeScript MCP SDK client, with OpenTelemetry spans
// exported over OTLP/HTTP. pytest-mcpfaults runs it against `python -m pytest_mcpfaults serve`
// (tests/test_ts_recipe.py) and reads the verdict on its spans from `GET /_mcpfaults/check`.
//
//   node harness.mjs hardened|unhardened|interop
//
// Environment: MCPFAULTS_MCP_URL (where the MCP endpoint is), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (`http/protobuf` or `http/json`), all three printed by `serve`;
// MCPFAULTS_TS_WAIT_MS bounds every wait of the client (default 2000); MCPFAULTS_TS_AUTH, against a
// `serve --auth` sidecar: `client_credentials` (the SDK's ClientCredentialsProvider, for the issuer
// MCPFAULTS_URL) or `bearer:<token>` (one fixed token).
// Prints one JSON line on stdout: what each step did, and the ids of the session span.

// --8<-- [start:tracing]
import { trace, SpanStatusCode } from "@opentelemetry/api";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";

const WAIT_MS = Number(process.env.MCPFAULTS_TS_WAIT_MS ?? 2000);

// The exporters read OTEL_EXPORTER_OTLP_TRACES_ENDPOINT themselves; the protocol picks the encoding.
const json = process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === "http/json";
const exporter = json
  ? new JsonExporter({ timeoutMillis: WAIT_MS })
  : new ProtoExporter({ timeoutMillis: WAIT_MS });
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "mcpfaults-ts-recipe" }),
  spanProcessors: [new BatchSpanProcessor(exporter, { exportTimeoutMillis: WAIT_MS })],
});
provider.register(); // AsyncLocalStorage context: spans started in a span's callback nest under it
const tracer = trace.getTracer("mcpfaults-ts-recipe");

// Like Python's start_as_current_span: an exception escaping the body is recorded, sets ERROR, and
// propagates to the caller (and so into the parent span's handler).
function inSpan(name, body) {
  return tracer.startActiveSpan(name, async (span) => {
    try {
      return await body(span);
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: describe(err) });
      throw err;
    } finally {
      span.end();
    }
  });
}

// "TypeError: fetch failed (ECONNRESET)": the error, and the network error beneath it if any.
function describe(err) {
  const cause = err?.cause?.code ?? err?.cause?.message;
  return `${err?.name ?? "Error"}: ${err?.message ?? String(err)}${cause ? ` (${cause})` : ""}`;
}
// --8<-- [end:tracing]

// --8<-- [start:client]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";

// Every POST and DELETE of the transport gives up after WAIT_MS: terminateSession() has no timeout of
// its own (under a hung DELETE it never returns). The GET is the server's event stream, open for as
// long as the session by design; client.close() aborts it.
function boundedFetch(url, init = {}) {
  if ((init.method ?? "GET") === "GET") return fetch(url, init);
  const signals = [AbortSignal.timeout(WAIT_MS), ...(init.signal ? [init.signal] : [])];
  return fetch(url, { ...init, signal: AbortSignal.any(signals) });
}

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCPFAULTS_MCP_URL), {
    fetch: boundedFetch,
    ...authOptions(process.env.MCPFAULTS_TS_AUTH),
  });
  const client = new Client({ name: "mcpfaults-ts-recipe", version: "1.0.0" });
  await client.connect(transport, { timeout: WAIT_MS }); // initialize: 60 s by default
  return { client, transport };
}

// An OAuth provider that gets (and after a 401 gets again) its token, or one fixed token, or no auth.
function authOptions(auth) {
  if (auth === "client_credentials") {
    return { authProvider: new ClientCredentialsProvider({
      clientId: "mcpfaults-ts-recipe", clientSecret: "s", expectedIssuer: process.env.MCPFAULTS_URL }) };
  }
  return auth?.startsWith("bearer:") ? { requestInit: { headers: { Authorization: `Bearer ${auth.slice(7)}` } } } : {};
}

// A benchmark tool's answer is JSON text; an {"error": ...} answer is a failure of that step.
async function tool(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: WAIT_MS });
  const answer = JSON.parse(result.content?.[0]?.text ?? "null");
  if (result.isError || answer?.error) {
    throw new Error(`${name} failed: ${answer?.error ?? result.content?.[0]?.text}`);
  }
  return answer;
}
// --8<-- [end:client]

const steps = [];
async function step(name, body) {
  const t0 = performance.now();
  try {
    const value = await body();
    steps.push({ step: name, ok: true, ms: Math.round(performance.now() - t0) });
    return value;
  } catch (err) {
    steps.push({ step: name, ok: false, error: describe(err), code: err?.code ?? null,
      ms: Math.round(performance.now() - t0) });
    throw err;
  }
}

// --8<-- [start:unhardened]
// The incident's harness: whatever escapes the session body, the failed delete included, becomes
// the session's error.
async function sessionUnhardened(client, transport) {
  return inSpan("Agent.Session", async (span) => {
    try {
      const { session_id } = await inSpan("MCP.CreateSession", () =>
        step("create_session", () => tool(client, "create_session", { task_id: "task-1" })));
      await inSpan("Evaluator.Evaluate", () =>
        step("evaluate_session", () => tool(client, "evaluate_session", { session_id })));
      await inSpan("MCP.DeleteSession", async () => {
        await step("delete_session", () => tool(client, "delete_session", { session_id }));
        await step("terminateSession", () => transport.terminateSession());
      });
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: describe(err) });
    }
    return span.spanContext();
  });
}
// --8<-- [end:unhardened]

// --8<-- [start:hardened]
// The session's status comes from its own work only: cleanup runs once, bounded, and whatever it
// raises is recorded on MCP.DeleteSession and goes no further.
async function sessionHardened(client, transport) {
  return inSpan("Agent.Session", async (span) => {
    let sessionId;
    try {
      ({ session_id: sessionId } = await inSpan("MCP.CreateSession", () =>
        step("create_session", () => tool(client, "create_session", { task_id: "task-1" }))));
      await inSpan("Evaluator.Evaluate", () =>
        step("evaluate_session", () => tool(client, "evaluate_session", { session_id: sessionId })));
    } catch (err) {
      span.recordException(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: describe(err) });
    }
    await inSpan("MCP.DeleteSession", async (cleanup) => {
      let failed = false;
      for (const [name, body] of [
        ["delete_session", () => sessionId && tool(client, "delete_session", { session_id: sessionId })],
        ["terminateSession", () => transport.terminateSession()],
      ]) {
        try {
          await step(name, body);
        } catch (err) {
          cleanup.recordException(err);
          if (!failed) cleanup.setStatus({ code: SpanStatusCode.ERROR, message: describe(err) });
          failed = true; // the first failure describes the span; later ones are its events
        }
      }
    });
    return span.spanContext();
  });
}
// --8<-- [end:hardened]

async function main(mode) {
  const out = { mode, steps };
  let client;
  try {
    let transport;
    ({ client, transport } = await step("connect", connect));
    out.protocol_version = transport.protocolVersion ?? null;
    out.session_id = transport.sessionId ?? null;
    const { tools } = await step("tools/list", () => client.listTools(undefined, { timeout: WAIT_MS }));
    out.tools = tools.map((t) => t.name).sort();
    if (mode === "interop") {
      const echoed = await step("echo", () => client.callTool({ name: "echo", arguments: { text: "hi" } },
        undefined, { timeout: WAIT_MS }));
      out.echo = echoed.content?.[0]?.text ?? null;
      await step("terminateSession", () => transport.terminateSession());
    } else {
      const ctx = await (mode === "hardened" ? sessionHardened : sessionUnhardened)(client, transport);
      out.session_span = { trace_id: ctx.traceId, span_id: ctx.spanId };
    }
  } catch (err) {
    out.error = describe(err);
    out.error_code = err?.code ?? null;
  } finally {
    await client?.close().catch(() => {});
    const t0 = performance.now();
    try {
      await provider.shutdown(); // exports what the batch still holds, bounded by exportTimeoutMillis
      out.export = { ok: true };
    } catch (err) {
      out.export = { ok: false, error: describe(err) };
    }
    out.export.ms = Math.round(performance.now() - t0);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

const mode = process.argv[2];
if (!["hardened", "unhardened", "interop"].includes(mode)) {
  process.stderr.write(`usage: node harness.mjs hardened|unhardened|interop (got ${JSON.stringify(mode)})\n`);
  process.exit(2);
}
if (!process.env.MCPFAULTS_MCP_URL) {
  process.stderr.write("harness.mjs: MCPFAULTS_MCP_URL is not set (serve prints it)\n");
  process.exit(2);
}
await main(mode);
