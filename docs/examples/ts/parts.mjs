// The official TypeScript MCP SDK client on each part of the MCP surface a harness meets beyond a plain
// tool call: cancellation, server requests, resumption, auth and progress. tests/test_ts_parts.py runs it
// against a pytest-mcpfaults Sidecar and asserts what this client saw (the JSON line) and what the
// sidecar journaled.
//
//   node parts.mjs cancel|elicit|resume|auth|code|progress '<json options>'
//
//   cancel   {how: "timeout"|"abort", timeout_ms}: sleep 5 s, given up at the SDK's request timeout
//            (`timeout`) or by an AbortSignal (`signal`) after timeout_ms
//   elicit   {handler: "answer"|"never"|"none", timeout_ms}: ask_user, with an elicitation handler that
//            answers, one that never resolves, or no elicitation capability at all
//   resume   {timeout_ms}: echo, answered through a stream the server may close (close_stream)
//   auth     {provider: "client_credentials"|"static", issuer, scope, token, timeout_ms}: echo twice,
//            with the SDK's ClientCredentialsProvider (for `issuer`, configured with `scope` if given) or
//            a fixed bearer `token`
//   code     {scope, refresh, timeout_ms}: echo twice, with an OAuthClientProvider for the authorization
//            code grant (in-memory storage, client metadata `scope` if given; refresh: false, it does not
//            keep the refresh tokens it is given) and a headless redirect: it GETs the
//            authorization URL without following the 302 and keeps its `code`; a step that fails with
//            UnauthorizedError while a code is kept is followed by transport.finishAuth(code) and the step
//            again (connect on a new transport and client, as the SDK's examples do)
//   progress {arguments, timeout_ms, reset, max_total_ms}: the `progress` tool with an onprogress
//            callback, with or without `resetTimeoutOnProgress` (and its `maxTotalTimeout`)
//
// Every mode then ends the session with terminateSession() (bounded), and closes the client. Options
// of every mode: settle_ms (let the event loop run that long before terminateSession()) and
// end: "close" (close the client without terminating the session).
//
// Environment: MCPFAULTS_MCP_URL; MCPFAULTS_TS_WAIT_MS bounds every other wait (connect, DELETE;
// default 2000). Prints one JSON line on stdout: what each step did, the progress and resumption tokens
// it saw, its session, and (mode code) each authorization redirect it followed; a step rejected with
// UnauthorizedError says `unauthorized: true`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const WAIT_MS = Number(process.env.MCPFAULTS_TS_WAIT_MS ?? 2000);
// Each mode's options (and those of every mode: settle_ms, end).
const OPTIONS = {
  cancel: ["how", "timeout_ms"],
  elicit: ["handler", "timeout_ms"],
  resume: ["timeout_ms"],
  auth: ["provider", "issuer", "scope", "token", "timeout_ms"],
  code: ["scope", "refresh", "timeout_ms"],
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
const out = { steps: [], progress: [], resumption_tokens: [], errors: [], redirects: [] };

// A step's outcome: `at` when it started and `ms` how long it took (the `at` of the progress and
// resumption tokens it saw, and of the errors the client reported, are on the same clock).
async function step(name, body) {
  const at = since();
  try {
    const value = await body();
    out.steps.push({ step: name, ok: true, value: value ?? null, at, ms: since() - at });
    return value;
  } catch (err) {
    const failed = { step: name, ok: false, error: describe(err), code: err?.code ?? null, at, ms: since() - at };
    if (err instanceof UnauthorizedError) failed.unauthorized = true; // the SDK's "sign in first"
    out.steps.push(failed);
    return undefined;
  }
}

// The authorization code grant's provider: storage in memory, and a headless user agent that approves
// at once (the sidecar's authorization endpoint answers a 302 with the code; nothing listens at the
// redirect URI, so the redirect is read, not followed).
const REDIRECT_URI = "http://localhost:8090/callback";
class MemoryProvider {
  constructor(scope, refresh = true) {
    [this.scope, this.refresh] = [scope, refresh];
    this.stored = {};
    this.code = undefined; // the last redirect's code, until finishAuth() takes it
  }
  get redirectUrl() { return REDIRECT_URI; }
  get clientMetadata() {
    return {
      client_name: "mcpfaults-ts-parts", redirect_uris: [REDIRECT_URI], response_types: ["code"],
      grant_types: ["authorization_code", "refresh_token"], ...(this.scope ? { scope: this.scope } : {}),
    };
  }
  clientInformation() { return this.stored.client; }
  saveClientInformation(info) { this.stored.client = info; }
  tokens() { return this.stored.tokens; }
  saveTokens(tokens) {
    const { refresh_token, ...rest } = tokens;
    this.stored.tokens = this.refresh ? tokens : rest;
  }
  saveCodeVerifier(verifier) { this.stored.verifier = verifier; }
  codeVerifier() { return this.stored.verifier; }
  async redirectToAuthorization(url) {
    const at = since();
    const answer = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(WAIT_MS) });
    const location = answer.headers.get("location");
    const back = location ? new URL(location).searchParams : new URLSearchParams();
    this.code = back.get("code") ?? undefined;
    const asked = url.searchParams;
    out.redirects.push({
      at, status: answer.status, scope: asked.get("scope"), method: asked.get("code_challenge_method"),
      code: this.code !== undefined, error: back.get("error"),
    });
  }
  take() {
    const code = this.code;
    this.code = undefined;
    return code;
  }
}
let provider; // mode code: one provider for every transport of the run

function transportFor(mode, opts) {
  const init = { fetch: boundedDelete };
  if (mode === "code") {
    provider ??= new MemoryProvider(opts.scope, opts.refresh ?? true);
    init.authProvider = provider;
  } else if (mode === "auth" && opts.provider === "client_credentials") {
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

// A step, and when it failed with UnauthorizedError while the provider holds a redirect's code:
// finishAuth(code) on `transport`, then `again()` ("<name> again"). Its value, and whether it ended well.
async function signedIn(name, body, transport, again = body) {
  const value = await step(name, body);
  const failed = out.steps.at(-1);
  if (failed.ok || provider?.code === undefined || !failed.unauthorized) {
    return { value, ok: failed.ok };
  }
  const code = provider.take();
  await step(`finishAuth ${name}`, () => transport.finishAuth(code));
  const retried = await step(`${name} again`, again);
  return { value: retried, ok: out.steps.at(-1).ok };
}

async function run(mode, opts, client, transport) {
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
  } else if (mode === "code") {
    for (const n of ["one", "two"]) {
      await signedIn(`tools/call echo ${n}`, () => call("echo", { text: n }), transport);
    }
  } else if (mode === "progress") {
    const onprogress = (p) => out.progress.push({ at: since(), progress: p.progress, total: p.total ?? null });
    await step("tools/call progress", () => call("progress", opts.arguments,
      { onprogress, resetTimeoutOnProgress: Boolean(opts.reset), maxTotalTimeout: opts.max_total_ms }));
  }
}

async function main(mode, opts) {
  out.mode = mode;
  let transport = transportFor(mode, opts);
  let client = clientFor(mode, opts);
  const connect = () => client.connect(transport, { timeout: WAIT_MS }).then(() => true);
  // Signed in by a redirect: connect again on a new transport and client (the SDK's examples do).
  const reconnect = async () => {
    await client.close().catch(() => {});
    [transport, client] = [transportFor(mode, opts), clientFor(mode, opts)];
    return connect();
  };
  const { ok: connected } = await signedIn("connect", connect, transport, reconnect);
  out.session_id = transport.sessionId ?? null;
  out.protocol_version = transport.protocolVersion ?? null;
  if (connected) {
    await run(mode, opts, client, transport);
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
