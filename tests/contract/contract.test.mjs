// The REST API as a contract: every operation of api/openapi.yaml is requested from a real
// `inac serve`, on its success and error paths, and every answer is checked against the document:
//   - its status must be one the operation declares;
//   - its Content-Type must be one of that response's media types;
//   - its body must validate against that media type's schema (Ajv, JSON Schema 2020-12, with
//     ajv-formats), and carry no object member the schema does not name (so that a field the
//     server adds is documented too);
//   - a request body the server accepted (2xx) must validate against the operation's request
//     schema (so that the document does not refuse what the server accepts).
// At the end every operation must have been answered at least one 2xx and one 4xx, and every
// shared response of components/responses must have been seen at least once: a route added to the
// server without its operation in the document (or the reverse) fails tests/server's
// openapi_contract_test; an operation of the document this file does not exercise fails here.
//
// Two servers, each on 127.0.0.1 with a port it picks:
//   - "demo": `inac serve --demo` (fat-tree k=4 of 20 emulated P4Runtime switches, 3 jobs) with
//     admin, operator, viewer and worker tokens from a config file: every success path, 401, 403,
//     and the request-level errors;
//   - "open": no tokens and no topology: 404 before a topology and a plan exist, 409 from
//     POST /plan/preview without a topology, 403 for a non-loopback Host or Origin, and the
//     transport's limits (408 with a short header timeout, 503 at the connection limit).
//
// Run through run.sh (CTest `api_contract`), which skips when node or node_modules are missing.
// Environment: INAC_BIN (the inac binary), INAC_OPENAPI (the document).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

const INAC = process.env.INAC_BIN;
const SPEC_PATH = process.env.INAC_OPENAPI;
assert.ok(INAC && SPEC_PATH, 'INAC_BIN and INAC_OPENAPI must be set (run.sh sets them)');

// Answers the document cannot honestly declare (server bugs), each with its reason; an answer
// matching one is reported, not failed. Keep this list empty whenever possible.
//   {operationId, status, reason}
const KNOWN_DEVIATIONS = [];

// ---------------------------------------------------------------------------------------------
// The document

const specText = readFileSync(SPEC_PATH, 'utf8');
const specDoc = YAML.parseDocument(specText, { uniqueKeys: true, strict: true, prettyErrors: true });
const SPEC = specDoc.toJS({ maxAliasCount: -1 });

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
ajv.addSchema(SPEC, 'openapi.yaml');
const validators = new Map();

function escapePointer(s) {
  return s.replaceAll('~', '~0').replaceAll('/', '~1');
}

function resolvePointer(pointer) {
  assert.ok(pointer.startsWith('#/'), `only local $refs are followed: ${pointer}`);
  let node = SPEC;
  for (const raw of pointer.slice(2).split('/')) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    node = node?.[key];
  }
  assert.ok(node !== undefined, `$ref ${pointer} resolves to nothing`);
  return node;
}

// A Response/Parameter/RequestBody object and its JSON pointer, following one $ref level at a time.
function deref(node, pointer) {
  while (node && node.$ref) {
    pointer = node.$ref;
    node = resolvePointer(pointer);
  }
  return { node, pointer };
}

function validatorAt(pointer) {
  if (!validators.has(pointer)) {
    validators.set(pointer, ajv.compile({ $ref: `openapi.yaml${pointer}` }));
  }
  return validators.get(pointer);
}

// Every operation: operationId -> {method, path, op, pointer, regex}.
const OPERATIONS = new Map();
for (const [path, item] of Object.entries(SPEC.paths)) {
  for (const method of ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace']) {
    const op = item[method];
    if (!op) continue;
    assert.ok(op.operationId, `${method.toUpperCase()} ${path} has no operationId`);
    assert.ok(!OPERATIONS.has(op.operationId), `operationId ${op.operationId} is used twice`);
    const regex = new RegExp(`^/api/v1${path.replace(/\{[^}]+\}/g, '[^/?]*')}(\\?.*)?$`);
    OPERATIONS.set(op.operationId, {
      method: method.toUpperCase(), path, op, regex,
      pointer: `#/paths/${escapePointer(path)}/${method}`,
    });
  }
}

// The members of an object that a schema names, following $ref, allOf, anyOf and oneOf; null
// when the schema leaves the object open (no `properties` anywhere, or additionalProperties).
function namedMembers(schema, seen = new Set()) {
  if (!schema || typeof schema !== 'object') return null;
  if (schema.$ref) {
    if (seen.has(schema.$ref)) return null;
    return namedMembers(resolvePointer(schema.$ref), new Set([...seen, schema.$ref]));
  }
  let names = null;
  let open = schema.additionalProperties !== undefined && schema.additionalProperties !== false;
  if (schema.properties) names = new Set(Object.keys(schema.properties));
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    for (const sub of schema[key] || []) {
      const n = namedMembers(sub, seen);
      if (n === null) {
        if (key === 'allOf' && !hasObjectShape(sub, seen)) continue;  // a constraint only
        open = true;
      } else {
        names = new Set([...(names || []), ...n]);
      }
    }
  }
  return open || names === null ? null : names;
}

function hasObjectShape(schema, seen) {
  if (!schema || typeof schema !== 'object') return false;
  if (schema.$ref) return seen.has(schema.$ref) ? false : hasObjectShape(resolvePointer(schema.$ref), seen);
  return schema.type === 'object' || schema.properties !== undefined;
}

// The sub-schemas an object member or array item of `schema` may match.
function memberSchemas(schema, member, seen = new Set()) {
  if (!schema || typeof schema !== 'object') return [];
  if (schema.$ref) {
    if (seen.has(schema.$ref)) return [];
    return memberSchemas(resolvePointer(schema.$ref), member, new Set([...seen, schema.$ref]));
  }
  const out = [];
  if (member === '[]' && schema.items) out.push(schema.items);
  if (member !== '[]' && schema.properties?.[member]) out.push(schema.properties[member]);
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    for (const sub of schema[key] || []) out.push(...memberSchemas(sub, member, seen));
  }
  return out;
}

// Object members of `data` that `schema` does not name, as JSON paths.
function undocumentedMembers(data, schemas, path = '') {
  const found = [];
  if (Array.isArray(data)) {
    const items = schemas.flatMap((s) => memberSchemas(s, '[]'));
    if (items.length) data.forEach((v, i) => found.push(...undocumentedMembers(v, items, `${path}[${i}]`)));
  } else if (data && typeof data === 'object') {
    const named = schemas.map((s) => namedMembers(s));
    if (named.length && named.every((n) => n !== null)) {
      const all = new Set(named.flatMap((n) => [...n]));
      for (const key of Object.keys(data)) if (!all.has(key)) found.push(`${path}.${key}`);
    }
    for (const [key, value] of Object.entries(data)) {
      const subs = schemas.flatMap((s) => memberSchemas(s, key));
      if (subs.length) found.push(...undocumentedMembers(value, subs, `${path}.${key}`));
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Checking answers

const exercised = new Map();  // operationId -> Set of statuses
const sharedSeen = new Set(); // names of components/responses answered
const deviations = [];
let answersChecked = 0;

function mediaType(contentType) {
  return (contentType || '').split(';')[0].trim().toLowerCase();
}

function knownDeviation(operationId, status) {
  return KNOWN_DEVIATIONS.find((k) => k.operationId === operationId && k.status === status);
}

// Checks one answer of `operationId` against the document; throws with what differs.
function check(operationId, answer, sent) {
  const spec = OPERATIONS.get(operationId);
  assert.ok(spec, `no operation ${operationId} in the document`);
  const where = `${spec.method} ${spec.path} (${operationId}) answered ${answer.status}`;
  answersChecked++;
  if (!exercised.has(operationId)) exercised.set(operationId, new Set());
  exercised.get(operationId).add(answer.status);
  const known = knownDeviation(operationId, answer.status);
  const declared = spec.op.responses[String(answer.status)];
  if (!declared) {
    if (known) {
      deviations.push(`${where}: ${known.reason}`);
      return;
    }
    assert.fail(`${where}, a status the operation does not declare; body: ${answer.text.slice(0, 300)}`);
  }
  const { node: response, pointer } = deref(declared, `${spec.pointer}/responses/${answer.status}`);
  if (declared.$ref) sharedSeen.add(declared.$ref.split('/').pop());
  const content = response.content || {};
  const type = mediaType(answer.headers['content-type']);
  if (Object.keys(content).length === 0) {
    assert.equal(answer.text, '', `${where}: the response declares no content, but a body came`);
    return;
  }
  assert.ok(content[type],
    `${where} with Content-Type "${answer.headers['content-type']}"; declared: ${Object.keys(content).join(', ')}`);
  if (type !== 'application/json') return;  // text/plain, text/event-stream: strings
  let body;
  try {
    body = JSON.parse(answer.text);
  } catch (e) {
    assert.fail(`${where}: the body is not JSON: ${e.message}: ${answer.text.slice(0, 200)}`);
  }
  const schemaPointer = `${pointer}/content/${escapePointer(type)}/schema`;
  const validate = validatorAt(schemaPointer);
  if (!validate(body)) {
    assert.fail(`${where}: the body does not match ${schemaPointer}:\n` +
      `${ajv.errorsText(validate.errors, { separator: '\n' })}\nbody: ${answer.text.slice(0, 600)}`);
  }
  const extra = undocumentedMembers(body, [content[type].schema]);
  assert.deepEqual(extra, [], `${where}: members the schema does not name: ${extra.join(', ')}`);
  if (answer.status >= 200 && answer.status < 300 && sent !== undefined) {
    const requestBody = deref(spec.op.requestBody, `${spec.pointer}/requestBody`);
    if (requestBody.node) {
      const v = validatorAt(`${requestBody.pointer}/content/application~1json/schema`);
      assert.ok(v(sent), `${where}: the server accepted a request body the document refuses:\n` +
        `${ajv.errorsText(v.errors, { separator: '\n' })}\nsent: ${JSON.stringify(sent).slice(0, 600)}`);
    }
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// Servers and requests

async function startServer(name, config, args) {
  const dir = mkdtempSync(join(tmpdir(), `inac-contract-${name}-`));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const proc = spawn(INAC, ['serve', '--config', join(dir, 'config.json'), '--db', join(dir, 'inac.db'),
    '--listen', '127.0.0.1:0', '--log-level', 'error', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${name}: no "listening on" line in 60 s\n${stderr}`)), 60000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on 127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`${name}: inac serve exited ${code}\n${stderr}`)));
  });
  proc.stdout.resume();
  return { name, port, proc, dir };
}

async function stopServer(server) {
  if (!server) return;
  const exited = new Promise((r) => server.proc.on('exit', r));
  server.proc.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15000))]);
  if (server.proc.exitCode === null && server.proc.signalCode === null) server.proc.kill('SIGKILL');
  rmSync(server.dir, { recursive: true, force: true });
}

// One request on its own connection: {status, headers, text}.
function send(server, method, path, { headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: server.port, method, path: `/api/v1${path}`, agent: false,
      headers: { Connection: 'close', ...headers },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(30000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    if (body !== undefined) {
      // Framed explicitly: Node sends a GET's or a DELETE's body unframed otherwise.
      req.setHeader('Content-Length', Buffer.byteLength(body));
      req.write(body);
    }
    req.end();
  });
}

// Bytes written as they are on one connection; resolves with the answer once the server closes
// (or `waitMs` passes): {status, headers, text}.
function sendRaw(server, bytes, { waitMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const done = () => {
      socket.destroy();
      const text = data.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no complete answer to ${JSON.stringify(bytes.slice(0, 80))}: ${JSON.stringify(text)}`));
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, text: text.slice(split + 4) });
    };
    const timer = setTimeout(done, waitMs);
    socket.on('connect', () => { if (bytes) socket.write(bytes); });
    socket.on('data', (d) => { data = Buffer.concat([data, d]); });
    socket.on('close', () => { clearTimeout(timer); done(); });
    socket.on('error', () => {});
  });
}

// The path of `operationId` with its {parameters} filled in.
function pathOf(operationId, params = {}) {
  const spec = OPERATIONS.get(operationId);
  assert.ok(spec, `no operation ${operationId} in the document`);
  return spec.path.replace(/\{([^}]+)\}/g, (_, name) => {
    assert.ok(name in params, `${operationId}: no value for {${name}}`);
    return encodeURIComponent(String(params[name]));
  });
}

// Requests `operationId` and checks the answer; `expect` is the status the case is about.
async function call(server, operationId, { params, query = '', token, body, rawBody, headers = {}, expect } = {}) {
  const spec = OPERATIONS.get(operationId);
  const h = { ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  let payload;
  if (rawBody !== undefined) {
    payload = rawBody;
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    if (!Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
  }
  const path = pathOf(operationId, params) + query;
  const answer = await send(server, spec.method, path, { headers: h, body: payload });
  const parsed = check(operationId, answer, body);
  if (expect !== undefined) {
    assert.equal(answer.status, expect,
      `${spec.method} ${path} (${operationId}): expected ${expect}, got ${answer.status}: ${answer.text.slice(0, 300)}`);
  }
  return { ...answer, json: parsed };
}

// A raw request to `operationId`'s path; checks the answer against that operation.
async function callRaw(server, operationId, bytes, expect, options) {
  const answer = await sendRaw(server, bytes, options);
  check(operationId, answer);
  assert.equal(answer.status, expect, `${operationId}: expected ${expect}, got ${answer.status}: ${answer.text.slice(0, 300)}`);
  return answer;
}

async function waitFor(what, fn, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

// ---------------------------------------------------------------------------------------------
// The cases

const TOKENS = {
  admin: 'admin-contract-test-0123456789',
  operator: 'operator-contract-test-0123456789',
  viewer: 'viewer-contract-test-0123456789',
  worker: 'worker-contract-test-0123456789',  // tenant "vision": demo jobs 1 and 2
};
const { admin, operator, viewer, worker } = TOKENS;

// A job on the demo fabric (docs/formats.md "Jobs").
const JOB = {
  name: 'contract-job', tenant: 'vision', workers: ['h0_0_0', 'h0_0_1'], parameter_servers: ['h0_1_0'],
  gradient_bytes: 1000000, compute_ms: 10, iterations: 100, batch_size: 32,
};

test('the document parses cleanly and names its operations', () => {
  assert.deepEqual(specDoc.errors.map(String), []);
  assert.deepEqual(specDoc.warnings.map(String), []);
  assert.equal(SPEC.openapi, '3.1.0');
  for (const [id, { op, method, path }] of OPERATIONS) {
    assert.ok(op.tags?.length, `${method} ${path} (${id}) has no tags`);
    assert.ok(op.description, `${method} ${path} (${id}) has no description`);
    for (const [status, r] of Object.entries(op.responses)) {
      const { node } = deref(r, '');
      for (const [type, media] of Object.entries(node.content || {})) {
        if (type === 'application/json') validatorAt(`${deref(r, `#/paths/${escapePointer(path)}/${method.toLowerCase()}/responses/${status}`).pointer}/content/application~1json/schema`);
        assert.ok(media.schema, `${id} ${status} ${type}: no schema`);
      }
    }
  }
  assert.ok(OPERATIONS.size >= 20, `only ${OPERATIONS.size} operations`);
});

describe('the demo fabric with tokens', () => {
  let s;
  let ids = {};

  before(async () => {
    s = await startServer('demo', {
      tokens: [
        { name: 'admin-test', token: admin, role: 'admin' },
        { name: 'operator-test', token: operator, role: 'operator' },
        { name: 'viewer-test', token: viewer, role: 'viewer' },
        { name: 'worker-test', token: worker, role: 'worker', tenant: 'vision' },
      ],
      http: { threads: 4 },
    }, ['--demo']);
    // The demo's jobs are planned and the switches programmed before the cases start.
    await waitFor('the demo jobs scheduled', async () => {
      const r = await send(s, 'GET', '/jobs?state=scheduled,running', { headers: { Authorization: `Bearer ${admin}` } });
      return r.status === 200 && JSON.parse(r.text).jobs.length >= 3;
    });
    await waitFor('the controller ready', async () => (await send(s, 'GET', '/readyz')).status === 200);
  });

  after(async () => {
    await stopServer(s);
  });

  test('health: /healthz, /readyz without a token, /metrics with one', async () => {
    await call(s, 'getHealth', { expect: 200 });
    await call(s, 'getReadiness', { expect: 200 });
    const m = await call(s, 'getMetrics', { token: viewer, expect: 200 });
    assert.match(m.text, /inac_/);
    await call(s, 'getMetrics', { expect: 401 });
    await call(s, 'getMetrics', { token: 'not-a-token', expect: 401 });
    await call(s, 'getMetrics', { token: worker, expect: 403 });
  });

  test('topology: GET, PUT (If-Match), links, switches', async () => {
    const t = await call(s, 'getTopology', { token: viewer, expect: 200 });
    const etag = t.headers.etag;
    assert.match(etag, /^"\d+"$/);
    await call(s, 'getTopology', { expect: 401 });
    await call(s, 'getTopology', { token: worker, expect: 403 });
    const put = await call(s, 'putTopology', { token: admin, body: t.json, headers: { 'If-Match': etag }, expect: 200 });
    await call(s, 'putTopology', { token: admin, body: t.json, headers: { 'If-Match': etag }, expect: 412 });
    await call(s, 'putTopology', { token: admin, body: t.json, headers: { 'If-Match': 'seven' }, expect: 400 });
    await call(s, 'putTopology', { token: admin, body: { ...t.json, racks: [] }, expect: 400 });
    await call(s, 'putTopology', { token: admin, rawBody: '{"switches": [', headers: { 'Content-Type': 'application/json' }, expect: 400 });
    await call(s, 'putTopology', { token: operator, body: t.json, expect: 403 });
    await call(s, 'putTopology', { body: t.json, expect: 401 });
    await call(s, 'putTopology', { token: admin, rawBody: 'switches=1', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, expect: 415 });
    const etag2 = put.headers.etag;

    const links = await call(s, 'listLinks', { token: viewer, expect: 200 });
    await call(s, 'listLinks', { expect: 401 });
    await call(s, 'listLinks', { token: worker, expect: 403 });
    const link = links.json.links[0].id;
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, body: { status: 'down' }, headers: { 'If-Match': etag2 }, expect: 200 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, body: { status: 'up' }, expect: 200 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, body: { status: 'up' }, headers: { 'If-Match': etag2 }, expect: 412 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, body: { status: 'sideways' }, expect: 400 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, body: { status: 'up', speed: 1 }, expect: 400 });
    await call(s, 'setLinkStatus', { params: { id: 'no-such-link' }, token: admin, body: { status: 'up' }, expect: 404 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: operator, body: { status: 'up' }, expect: 403 });
    await call(s, 'setLinkStatus', { params: { id: link }, body: { status: 'up' }, expect: 401 });
    await call(s, 'setLinkStatus', { params: { id: link }, token: admin, rawBody: 'status=up', headers: { 'Content-Type': 'text/plain' }, expect: 415 });

    const sw = await call(s, 'listSwitches', { token: viewer, expect: 200 });
    assert.equal(sw.json.switches.length, 20);
    await call(s, 'listSwitches', { expect: 401 });
    await call(s, 'listSwitches', { token: worker, expect: 403 });
    // A GET with a body that is not JSON is refused like any other request.
    await call(s, 'listSwitches', { token: viewer, rawBody: 'x', headers: { 'Content-Type': 'text/plain' }, expect: 415 });
    await call(s, 'getSwitch', { params: { id: sw.json.switches[0].id }, token: viewer, expect: 200 });
    await call(s, 'getSwitch', { params: { id: 'no-such-switch' }, token: viewer, expect: 404 });
    await call(s, 'getSwitch', { params: { id: sw.json.switches[0].id }, expect: 401 });
    await call(s, 'getSwitch', { params: { id: sw.json.switches[0].id }, token: worker, expect: 403 });
  });

  test('jobs: submit (Idempotency-Key), list, get, config, progress, data path, cancel', async () => {
    const created = await call(s, 'submitJob', { token: operator, body: JOB, headers: { 'Idempotency-Key': 'contract-1' }, expect: 201 });
    ids.job = created.json.id;
    assert.equal(created.headers.location, `/api/v1/jobs/${ids.job}`);
    await call(s, 'submitJob', { token: operator, body: JOB, headers: { 'Idempotency-Key': 'contract-1' }, expect: 200 });
    await call(s, 'submitJob', { token: operator, body: { ...JOB, iterations: 7 }, headers: { 'Idempotency-Key': 'contract-1' }, expect: 409 });
    await call(s, 'submitJob', { token: operator, body: JOB, headers: { 'Idempotency-Key': '' }, expect: 400 });
    await call(s, 'submitJob', { token: operator, body: { ...JOB, workers: ['nowhere'] }, expect: 400 });
    await call(s, 'submitJob', { token: operator, body: { ...JOB, colour: 'blue' }, expect: 400 });
    await call(s, 'submitJob', { token: operator, rawBody: '[1, 2]', headers: { 'Content-Type': 'application/json' }, expect: 400 });
    await call(s, 'submitJob', { token: viewer, body: JOB, expect: 403 });
    await call(s, 'submitJob', { token: worker, body: JOB, expect: 403 });
    await call(s, 'submitJob', { body: JOB, expect: 401 });
    await call(s, 'submitJob', { token: operator, rawBody: 'name=x', headers: { 'Content-Type': 'text/plain' }, expect: 415 });
    // A body over the 1 MiB limit: refused from its Content-Length, before it is read.
    await call(s, 'submitJob', { token: operator, rawBody: JSON.stringify({ ...JOB, name: 'x'.repeat(1100000) }), headers: { 'Content-Type': 'application/json' }, expect: 413 });

    await call(s, 'listJobs', { token: viewer, expect: 200 });
    const page = await call(s, 'listJobs', { token: viewer, query: '?state=pending,scheduled,running&tenant=vision&limit=1', expect: 200 });
    assert.ok(page.json.next_after !== null);
    await call(s, 'listJobs', { token: viewer, query: `?after=${page.json.next_after}&limit=1000`, expect: 200 });
    await call(s, 'listJobs', { token: viewer, query: '?state=sleeping', expect: 400 });
    await call(s, 'listJobs', { token: viewer, query: '?limit=0', expect: 400 });
    await call(s, 'listJobs', { token: viewer, query: '?after=x', expect: 400 });
    await call(s, 'listJobs', { token: viewer, query: '?tenant=%20bad', expect: 400 });
    await call(s, 'listJobs', { expect: 401 });
    await call(s, 'listJobs', { token: worker, expect: 403 });

    await waitFor(`job ${ids.job} scheduled`, async () => {
      const r = await call(s, 'getJob', { params: { id: ids.job }, token: viewer, expect: 200 });
      return r.json.state === 'scheduled' || r.json.state === 'running';
    });
    await call(s, 'getJob', { params: { id: ids.job }, token: worker, expect: 200 });
    await call(s, 'getJob', { params: { id: 3 }, token: worker, expect: 403 });  // tenant nlp
    await call(s, 'getJob', { params: { id: 999999 }, token: viewer, expect: 404 });
    await call(s, 'getJob', { params: { id: 'abc' }, token: viewer, expect: 404 });
    await call(s, 'getJob', { params: { id: ids.job }, expect: 401 });

    const config = await call(s, 'getJobConfig', { params: { id: ids.job }, token: worker, expect: 200 });
    assert.ok(config.json.tags.length > 0);
    await call(s, 'getJobConfig', { params: { id: 1 }, token: viewer, expect: 200 });
    await call(s, 'getJobConfig', { params: { id: 3 }, token: worker, expect: 403 });
    await call(s, 'getJobConfig', { params: { id: 999999 }, token: viewer, expect: 404 });
    await call(s, 'getJobConfig', { params: { id: ids.job }, expect: 401 });

    const progress = (body, token, expect, id = ids.job) =>
      call(s, 'reportJobProgress', { params: { id }, token, body, expect });
    await progress({ iterations_done: 10, loss: 2.5 }, worker, 200);
    await progress({ iterations_done: 20, loss: 2.0, grad_sqr_local: 4.0, grad_sqr_global: 1.5 }, operator, 200);
    await progress({ iterations_done: 5 }, operator, 400);            // backwards
    await progress({ iterations_done: 30, speed: 1 }, operator, 400); // unknown field
    await progress({ iterations_done: 30, grad_sqr_local: 1 }, operator, 400);
    await progress({ iterations_done: 30 }, viewer, 403);
    await progress({ iterations_done: 30 }, worker, 403, 3);
    await progress({ iterations_done: 30 }, undefined, 401);
    await progress({ iterations_done: 30 }, operator, 404, 999999);

    const report = (body, token, expect, id = ids.job) =>
      call(s, 'reportJobDataPath', { params: { id }, token, body, expect });
    await report({ worker: 'h0_0_0', path: 'ina', allreduces: 10, fallbacks: 0 }, worker, 200);
    const dp = await report({ worker: 'h0_0_1', path: 'fallback', reason: 'timeout', allreduces: 10, fallbacks: 2 }, operator, 200);
    assert.equal(dp.json.state, 'mixed');
    await report({ worker: 'h9', path: 'ina', allreduces: 1, fallbacks: 0 }, operator, 400);
    await report({ worker: 'h0_0_0', path: 'carrier-pigeon', allreduces: 1, fallbacks: 0 }, operator, 400);
    await report({ worker: 'h0_0_0', path: 'ina' }, operator, 400);
    await report({ worker: 'h0_0_0', path: 'ina', allreduces: 1, fallbacks: 0 }, viewer, 403);
    await report({ worker: 'h0_0_0', path: 'ina', allreduces: 1, fallbacks: 0 }, undefined, 401);
    await report({ worker: 'h0_0_0', path: 'ina', allreduces: 1, fallbacks: 0 }, operator, 404, 999999);
    // The job with its counters and its data path; the list with the data path.
    const job = await call(s, 'getJob', { params: { id: ids.job }, token: viewer, expect: 200 });
    assert.ok(job.json.ina_counters && job.json.data_path);
    await call(s, 'listJobs', { token: viewer, query: '?tenant=vision', expect: 200 });

    await call(s, 'cancelJob', { params: { id: ids.job }, token: viewer, expect: 403 });
    await call(s, 'cancelJob', { params: { id: ids.job }, token: worker, expect: 403 });
    await call(s, 'cancelJob', { params: { id: ids.job }, expect: 401 });
    await call(s, 'cancelJob', { params: { id: 999999 }, token: operator, expect: 404 });
    await call(s, 'cancelJob', { params: { id: ids.job }, token: operator, expect: 200 });
    await call(s, 'cancelJob', { params: { id: ids.job }, token: operator, expect: 409 });
    await progress({ iterations_done: 30 }, operator, 409);
    await report({ worker: 'h0_0_0', path: 'ina', allreduces: 11, fallbacks: 0 }, operator, 409);
    // Gradient statistics need two workers: a job of one is 409.
    const solo = await call(s, 'submitJob', { token: operator, body: { ...JOB, name: 'solo', workers: ['h0_0_0'] }, expect: 201 });
    await waitFor(`job ${solo.json.id} scheduled`, async () => {
      const r = await call(s, 'getJob', { params: { id: solo.json.id }, token: viewer, expect: 200 });
      return r.json.state === 'scheduled' || r.json.state === 'running';
    });
    await progress({ iterations_done: 1, grad_sqr_local: 1, grad_sqr_global: 1 }, operator, 409, solo.json.id);
    await progress({ iterations_done: 100 }, operator, 200, solo.json.id);  // completes it
  });

  test('plan: current, preview', async () => {
    await waitFor('a plan', async () => (await send(s, 'GET', '/plan', { headers: { Authorization: `Bearer ${viewer}` } })).status === 200);
    await call(s, 'getPlan', { token: viewer, expect: 200 });
    await call(s, 'getPlan', { expect: 401 });
    await call(s, 'getPlan', { token: worker, expect: 403 });
    const preview = await call(s, 'previewPlan', { token: operator, body: JOB, expect: 200 });
    assert.ok(preview.json.jobs.some((j) => j.job_id === 0));
    await call(s, 'previewPlan', { token: operator, body: { ...JOB, workers: [] }, expect: 400 });
    await call(s, 'previewPlan', { token: viewer, body: JOB, expect: 403 });
    await call(s, 'previewPlan', { body: JOB, expect: 401 });
    await call(s, 'previewPlan', { token: operator, rawBody: 'x', headers: { 'Content-Type': 'text/csv' }, expect: 415 });
  });

  test('events: poll and stream (and the stream limit)', async () => {
    const events = await call(s, 'listEvents', { token: viewer, expect: 200 });
    assert.ok(events.json.events.length > 0);
    await call(s, 'listEvents', { token: viewer, query: '?since=1&limit=5&kind=job_submitted', expect: 200 });
    await call(s, 'listEvents', { token: viewer, query: '?tail=3&job=1', expect: 200 });
    await call(s, 'listEvents', { token: viewer, query: '?tail=3&since=1', expect: 400 });
    await call(s, 'listEvents', { token: viewer, query: '?limit=5000', expect: 400 });
    await call(s, 'listEvents', { token: viewer, query: '?since=-1', expect: 400 });
    await call(s, 'listEvents', { expect: 401 });
    await call(s, 'listEvents', { token: worker, expect: 403 });

    // Streams hold a handler thread each: at most threads / 2 = 2 at once.
    const opened = [];
    try {
      for (let i = 0; i < 2; i++) {
        opened.push(await openStream(s, viewer));
        check('streamEvents', opened[i].answer);
        assert.equal(opened[i].answer.status, 200);
      }
      assert.match(opened[0].answer.text, /^(id: \d+\nevent: \S+\ndata: \{.*\}\n\n|: keep-alive\n\n)/);
      await call(s, 'streamEvents', { token: viewer, expect: 503 });
    } finally {
      for (const o of opened) o.close();
    }
    await new Promise((r) => setTimeout(r, 1500));  // the streams notice their clients left
    await call(s, 'streamEvents', { token: viewer, query: '?since=x', expect: 400 });
    await call(s, 'streamEvents', { token: viewer, query: '?since=-1', expect: 400 });
    await call(s, 'streamEvents', { token: viewer, headers: { 'Last-Event-ID': '-5' }, expect: 400 });
    await call(s, 'streamEvents', { expect: 401 });
    await call(s, 'streamEvents', { token: worker, expect: 403 });
  });

  test('audit and whoami', async () => {
    const audit = await call(s, 'listAudit', { token: admin, expect: 200 });
    assert.ok(audit.json.entries.length > 0);
    await call(s, 'listAudit', { token: admin, query: '?actor=operator-test&limit=2&after=1', expect: 200 });
    await call(s, 'listAudit', { token: admin, query: '?limit=0', expect: 400 });
    await call(s, 'listAudit', { token: admin, query: '?actor=', expect: 400 });
    await call(s, 'listAudit', { token: operator, expect: 403 });
    await call(s, 'listAudit', { expect: 401 });

    const me = await call(s, 'whoami', { token: operator, expect: 200 });
    assert.deepEqual(me.json, { name: 'operator-test', role: 'operator', auth: true });
    await call(s, 'whoami', { token: worker, expect: 403 });
    await call(s, 'whoami', { expect: 401 });
  });

  test('stats', async () => {
    for (const id of ['getSwitchStats', 'getJobStats', 'getControllerStats']) {
      await call(s, id, { token: viewer, expect: 200 });
      await call(s, id, { token: viewer, query: '?since_ms=1', expect: 200 });
      await call(s, id, { token: viewer, query: '?since_ms=-5', expect: 400 });
      await call(s, id, { expect: 401 });
      await call(s, id, { token: worker, expect: 403 });
    }
    await call(s, 'getJobStats', { token: viewer, query: '?job=1', expect: 200 });
    await call(s, 'getJobStats', { token: viewer, query: '?job=0', expect: 400 });
  });

  test('the HTTP layer: malformed, too long, too many headers, codings, versions', async () => {
    const auth = `Authorization: Bearer ${viewer}\r\n`;
    await callRaw(s, 'listLinks', `GET /api/v1/links HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n`, 400);
    await callRaw(s, 'listJobs', `GET /api/v1/jobs?tenant=${'a'.repeat(9000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n`, 414);
    const many = Array.from({ length: 120 }, (_, i) => `X-Filler-${i}: ${i}\r\n`).join('');
    await callRaw(s, 'listSwitches', `GET /api/v1/switches HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}${many}\r\n`, 431);
    await callRaw(s, 'getTopology', `GET /api/v1/topology HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}X-Big: ${'b'.repeat(20000)}\r\n\r\n`, 431);
    await callRaw(s, 'submitJob', `POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${operator}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n`, 501);
    await callRaw(s, 'getHealth', `GET /api/v1/healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n`, 505);
    // A chunked body that grows past the limit.
    const chunk = 'x'.repeat(65536);
    const chunks = Array.from({ length: 17 }, () => `10000\r\n${chunk}\r\n`).join('');
    await callRaw(s, 'previewPlan', `POST /api/v1/plan/preview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${operator}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}0\r\n\r\n`, 413);
  });
});

// Opens GET /events/stream and reads its first chunk: {answer, close}.
function openStream(server, token) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: server.port, method: 'GET', path: '/api/v1/events/stream', agent: false,
      headers: { Authorization: `Bearer ${token}` },
    }, (res) => {
      res.setEncoding('utf8');
      res.once('data', (d) => {
        resolve({ answer: { status: res.statusCode, headers: res.headers, text: d }, close: () => req.destroy() });
      });
      res.on('error', () => {});
    });
    req.on('error', (e) => reject(e));
    req.setTimeout(15000, () => req.destroy(new Error('no event-stream data in 15 s')));
    req.end();
  });
}

describe('a controller without tokens or topology', () => {
  let s;

  before(async () => {
    s = await startServer('open', { http: { threads: 2, header_timeout_ms: 1000, max_connections_per_client: 12 } }, []);
  });

  after(async () => {
    await stopServer(s);
  });

  test('before a topology: 404, 409 and empty lists', async () => {
    await call(s, 'getHealth', { expect: 200 });
    await call(s, 'getTopology', { expect: 404 });
    await call(s, 'getPlan', { expect: 404 });
    await call(s, 'previewPlan', { body: JOB, expect: 409 });
    await call(s, 'setLinkStatus', { params: { id: 'a~b' }, body: { status: 'down' }, expect: 404 });
    await call(s, 'listLinks', { expect: 200 });
    await call(s, 'listSwitches', { expect: 200 });
    await call(s, 'getSwitch', { params: { id: 's1' }, expect: 404 });
    await call(s, 'putTopology', { body: { switches: [] }, headers: { 'If-Match': '"3"' }, expect: 412 });
    const me = await call(s, 'whoami', { expect: 200 });
    assert.deepEqual(me.json, { name: 'anonymous', role: 'admin', auth: false });
  });

  test('a small fabric without switches to program', async () => {
    const topology = {
      switches: [{ id: 's1', ina: { capable: true, processing_gbps: 100, aggregators: 1024 } }],
      hosts: [{ id: 'h1', address: '10.0.0.1' }, { id: 'h2', address: '10.0.0.2' }, { id: 'h3', address: '10.0.0.3' }],
      links: [{ a: 'h1', b: 's1', gbps: 10 }, { a: 'h2', b: 's1', gbps: 10 }, { a: 'h3', b: 's1', gbps: 10, latency_us: 2 }],
    };
    await call(s, 'putTopology', { body: topology, expect: 200 });
    await call(s, 'putTopology', { body: { ...topology, links: [{ a: 'h1', b: 'nowhere', gbps: 10 }] }, expect: 400 });
    const t = await call(s, 'getTopology', { expect: 200 });
    assert.equal(t.json.links[0].id, 'h1~s1');
    await call(s, 'getSwitch', { params: { id: 's1' }, expect: 200 });
    const job = await call(s, 'submitJob', { body: { name: 'j', model: 'AlexNet', workers: ['h1', 'h2'], parameter_servers: ['h3'], iterations: 10, batch_size: 8 }, expect: 201 });
    await call(s, 'getJob', { params: { id: job.json.id }, expect: 200 });
    await call(s, 'getJobConfig', { params: { id: job.json.id }, expect: 200 });
    await call(s, 'setLinkStatus', { params: { id: 'h3~s1' }, body: { status: 'down' }, expect: 200 });
    await call(s, 'listAudit', { expect: 200 });
  });

  test('without tokens only loopback Hosts and Origins are served', async () => {
    await call(s, 'getHealth', { headers: { Host: 'inac.example.com' }, expect: 403 });
    await call(s, 'getReadiness', { headers: { Host: 'inac.example.com:8080' }, expect: 403 });
    await call(s, 'submitJob', { body: JOB, headers: { Origin: 'https://attacker.example' }, expect: 403 });
    await call(s, 'cancelJob', { params: { id: 1 }, headers: { Origin: 'null' }, expect: 403 });
    await call(s, 'whoami', { headers: { Host: 'localhost' }, expect: 200 });
  });

  test('the transport: header timeout (408) and the connection limit (503)', async () => {
    await callRaw(s, 'getMetrics', `GET /api/v1/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 408, { waitMs: 8000 });
    // Idle connections up to the per-client limit; the next is refused with 503 and closed.
    const idle = [];
    try {
      let refused = null;
      for (let i = 0; i < 20 && !refused; i++) {
        const socket = net.connect(s.port, '127.0.0.1');
        socket.on('error', () => {});
        idle.push(socket);
        const answer = await new Promise((resolve) => {
          let data = '';
          const timer = setTimeout(() => resolve(null), 300);
          socket.on('data', (d) => { data += d.toString('latin1'); });
          socket.on('close', () => { clearTimeout(timer); resolve(data || null); });
        });
        if (answer) refused = answer;
      }
      assert.ok(refused, 'no connection was refused at max_connections_per_client');
      const split = refused.indexOf('\r\n\r\n');
      const headers = {};
      for (const line of refused.slice(0, split).split('\r\n').slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      // Refused before any request is read: an answer every operation declares; counted for
      // GET /healthz.
      const answer = { status: Number(refused.split(' ')[1]), headers, text: refused.slice(split + 4) };
      check('getHealth', answer);
      assert.equal(answer.status, 503);
    } finally {
      for (const socket of idle) socket.destroy();
    }
  });
});

test('every operation was answered a 2xx and a 4xx, and every shared response was seen', () => {
  const missing = [];
  for (const [id, { method, path }] of OPERATIONS) {
    const statuses = [...(exercised.get(id) || [])];
    if (!statuses.some((c) => c >= 200 && c < 300)) missing.push(`${method} ${path} (${id}): no 2xx`);
    if (!statuses.some((c) => c >= 400 && c < 500)) missing.push(`${method} ${path} (${id}): no 4xx`);
  }
  const unseen = Object.keys(SPEC.components.responses).filter((name) => !sharedSeen.has(name));
  const cases = [...exercised.values()].reduce((n, set) => n + set.size, 0);
  console.log(JSON.stringify({
    contract_operations: OPERATIONS.size,
    contract_operation_statuses: cases,
    contract_answers_checked: answersChecked,
    contract_statuses: Object.fromEntries([...exercised].map(([id, set]) => [id, [...set].sort()])),
    known_deviations: deviations,
  }));
  assert.deepEqual(missing, [], 'operations not exercised');
  assert.deepEqual(unseen, [], 'shared responses never answered');
});
