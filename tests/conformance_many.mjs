// The conformance suite's CLI (`conformance server --url URL --scenario NAME -o DIR`) run several times in
// one Node process, PARALLEL runs at a time (tests/conformance_run.py's run_each):
//
//     node conformance_many.mjs BUNDLE PARALLEL URL NAME DIR [NAME DIR ...]
//
// Each run is a module instance of its own (BUNDLE imported again under a query string of its own), so
// it parses its own process.argv and writes its results to its own DIR as a separate CLI process
// would; what the instances share is what Node caches between them, the suite's dependencies loaded
// once (the SDK, zod, express: most of a run's start-up CPU). A run ends at the CLI's process.exit,
// which here ends only that run (an AsyncLocalStorage tells which); the process exits 1 when any run
// did, as the CLI does when a scenario fails.
import { AsyncLocalStorage } from "node:async_hooks";
import { pathToFileURL } from "node:url";

const [bundle, parallel, url, ...pairs] = process.argv.slice(2);
const jobs = [];
for (let i = 0; i + 1 < pairs.length; i += 2) jobs.push({ scenario: pairs[i], out: pairs[i + 1] });
if (!bundle || !(Number(parallel) >= 1) || !url || jobs.length === 0 || pairs.length % 2 !== 0) {
  console.error("usage: node conformance_many.mjs BUNDLE PARALLEL URL NAME DIR [NAME DIR ...]");
  process.exit(2);
}

const realExit = process.exit.bind(process);
const current = new AsyncLocalStorage();
const ending = new Map(); // run id -> what ends it, until its first exit
class RunExited extends Error {}

process.exit = (code) => {
  const id = current.getStore();
  if (id === undefined) realExit(code);
  ending.get(id)?.(code ?? 0);
  ending.delete(id);
  throw new RunExited(); // what the CLI does after its exit does not run
};
for (const event of ["unhandledRejection", "uncaughtException"]) {
  process.on(event, (error) => {
    if (!(error instanceof RunExited)) {
      console.error(error);
      realExit(2);
    }
  });
}

let next = 0;
let failed = 0;
let loading = Promise.resolve(); // a CLI reads process.argv while its module is evaluated: one at a time
async function worker() {
  while (next < jobs.length) {
    const id = next++;
    const { scenario, out } = jobs[id];
    const ended = new Promise((resolve) => ending.set(id, resolve));
    loading = loading.then(() => {
      process.argv = [process.argv[0], bundle, "server", "--url", url, "--scenario", scenario, "-o", out];
      return current.run(id, () =>
        import(`${pathToFileURL(bundle).href}?run=${id}`).catch((error) => {
          if (!(error instanceof RunExited)) throw error; // an exit while its module was evaluated
        }),
      );
    });
    await loading;
    failed |= (await ended) !== 0;
  }
}
await Promise.all(Array.from({ length: Number(parallel) }, worker));
realExit(failed ? 1 : 0);
