// Follows a job's event stream with the npm `eventsource` package, as any
// standard EventSource would, and prints what it saw as JSON lines:
//   {"kind":"job","id":"<last event id>","state":"..."}  per job event
//   {"kind":"error","code":<status or null>,"message":"...","readyState":n}
//   {"kind":"done","readyState":n}  once closed (or at the deadline)
// The API needs a bearer token, which the browser's EventSource cannot send;
// this package takes a fetch function that adds the header.
//
// usage: node sse-follow.mjs <events url> <token> <deadline ms>
import { EventSource } from 'eventsource';

const [url, token, deadlineMs] = process.argv.slice(2);
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

const es = new EventSource(url, {
  fetch: (input, init) =>
    fetch(input, { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } }),
});

let finished = false;
function finish() {
  if (finished) return;
  finished = true;
  out({ kind: 'done', readyState: es.readyState });
  es.close();
  clearTimeout(deadline);
}
const deadline = setTimeout(finish, Number(deadlineMs));

es.addEventListener('job', (ev) => {
  const job = JSON.parse(ev.data);
  out({ kind: 'job', id: ev.lastEventId, state: job.state });
});
es.addEventListener('problem', (ev) => out({ kind: 'problem', data: ev.data }));
es.addEventListener('error', (ev) => {
  out({ kind: 'error', code: ev.code ?? null, message: ev.message ?? '', readyState: es.readyState });
  // CLOSED after an error means the client gave up for good (the 204).
  if (es.readyState === EventSource.CLOSED) finish();
});
