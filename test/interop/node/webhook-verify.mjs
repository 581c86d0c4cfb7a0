// Verifies webhook deliveries with the official Standard Webhooks library.
// stdin: {"secret":"whsec_...","deliveries":[{"headers":{...},"body":"..."}]}
// stdout: one JSON line per delivery, {"ok":true,"id":"<webhook-id>","job":"<job id>"}
// or {"ok":false,"id":"...","error":"..."}. The body is the Standard
// Webhooks envelope {"type":"job.<state>","timestamp":...,"data":<job>}.
import { Webhook } from 'standardwebhooks';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { secret, deliveries } = JSON.parse(input);
const wh = new Webhook(secret);
for (const d of deliveries) {
  const id = d.headers['webhook-id'];
  try {
    const payload = wh.verify(d.body, d.headers);
    process.stdout.write(`${JSON.stringify({ ok: true, id, type: payload.type, job: payload.data && payload.data.id })}\n`);
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ ok: false, id, error: String(e && e.message) })}\n`);
  }
}
