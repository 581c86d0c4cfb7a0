import { Permanent, Worker } from "@jobgate/worker";

interface Params { name: string; times: number }

const worker = new Worker({
  servers: process.env.JOBGATE_NATS_URL ?? "nats://127.0.0.1:4222",
  user: process.env.JOBGATE_WORKER_USER,     // jobgate nats-user --worker --type greeting --json
  pass: process.env.JOBGATE_WORKER_PASSWORD,
});
worker.register<Params>({
  name: "greeting",
  schema: { type: "object", additionalProperties: false, required: ["name"],
            properties: { name: { type: "string", maxLength: 64 },
                          times: { type: "integer", minimum: 1, maximum: 10, default: 1 } } },
  timeoutSeconds: 60, attempts: 3, contentType: "text/plain",
  work: async (job) => {
    if (job.params.name === "nobody") throw new Permanent("say whom to greet"); // the user reads it
    for (let i = 1; i <= job.params.times; i++) {
      job.signal.throwIfAborted();                 // canceled, claim lost, timed out, stopping
      await job.write(`Hello, ${job.params.name}!\n`);
      job.progress(i, job.params.times, "lines");
    }
  },                                               // returning succeeds; other errors are retried
});
await worker.start();                              // declares the type, then takes jobs
process.once("SIGTERM", () => void worker.stop()); // finishes or gives back running jobs
