// Tests of the parts that need no cluster: envelopes, error decoding, the
// retry rules, and failover with the same bytes, against scripted HTTP
// servers that answer as a Connect server would.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import { Client, EnvelopeReader, envelope, decodeErrorInfo, fromConnectError, retryable, SessionStoreError } from '../lib/index.js'
import { freePort } from './support/cluster.mjs'

function errorInfoBytes (reason, domain, metadata = {}) {
  const str = (field, s) => { const b = Buffer.from(s); return Buffer.concat([Buffer.from([field << 3 | 2, b.length]), b]) }
  const parts = [str(1, reason), str(2, domain)]
  for (const [k, v] of Object.entries(metadata)) {
    const entry = Buffer.concat([str(1, k), str(2, v)])
    parts.push(Buffer.concat([Buffer.from([3 << 3 | 2, entry.length]), entry]))
  }
  return Buffer.concat(parts)
}

function connectError (code, message, reason) {
  const details = reason === undefined ? [] : [{ type: 'google.rpc.ErrorInfo', value: errorInfoBytes(reason, 'sessionstore').toString('base64') }]
  return { code, message, details }
}

test('EnvelopeReader splits envelopes at any chunk boundary', () => {
  const msgs = ['{"a":1}', '{}', '{"events":["x\\u00e9"]}']
  const bytes = Buffer.concat([...msgs.map(m => envelope(m)), envelope('{"metadata":{}}', 2)])
  for (const size of [1, 2, 3, 5, 7, bytes.length]) {
    const r = new EnvelopeReader()
    const got = []
    for (let i = 0; i < bytes.length; i += size) got.push(...r.push(bytes.subarray(i, i + size)))
    assert.deepEqual(got.map(f => [f.flags, Buffer.from(f.data).toString()]), [...msgs.map(m => [0, m]), [2, '{"metadata":{}}']], `chunk size ${size}`)
    assert.equal(r.pending, 0)
  }
})

test('decodeErrorInfo reads reason, domain and metadata', () => {
  const info = decodeErrorInfo(errorInfoBytes('SEQ_MISMATCH', 'sessionstore', { leader: 'n2' }))
  assert.deepEqual(info, { reason: 'SEQ_MISMATCH', domain: 'sessionstore', metadata: { leader: 'n2' } })
})

test('fromConnectError takes the reason of the store domain only', () => {
  const e = fromConnectError(connectError('failed_precondition', 'append seq mismatch', 'SEQ_MISMATCH'), 'http://x', 'unknown')
  assert.equal(e.code, 'failed_precondition')
  assert.equal(e.reason, 'SEQ_MISMATCH')
  assert.equal(e.message, 'append seq mismatch')
  assert.equal(e.definite, true)
  const other = fromConnectError({ code: 'unavailable', message: 'm', details: [{ type: 'google.rpc.ErrorInfo', value: errorInfoBytes('X', 'other.domain').toString('base64') }] }, 'http://x', 'unknown')
  assert.equal(other.reason, undefined)
  assert.equal(other.definite, false)
})

test('retryable follows the store rules', () => {
  const cases = [
    // [policy, code, reason, want]
    ['mutating', 'unavailable', 'OUTCOME_UNKNOWN', true],
    ['read', 'unavailable', 'OUTCOME_UNKNOWN', false],
    ['once', 'unavailable', 'NO_LEADER', true],
    ['once', 'unavailable', 'SHUTTING_DOWN', true],
    ['once', 'unavailable', undefined, false],
    ['mutating', 'unavailable', undefined, true],
    ['read', 'deadline_exceeded', undefined, true],
    ['mutating', 'failed_precondition', 'SEQ_MISMATCH', false],
    ['mutating', 'failed_precondition', 'LEASE_FENCED', false],
    ['read', 'internal', undefined, false],
  ]
  for (const [p, code, reason, want] of cases) {
    assert.equal(retryable(p, new SessionStoreError(code, 'm', { reason })), want, `${p} ${code} ${reason}`)
  }
})

/** A scripted Connect server: answer(path, body, n) returns [status, json, extra response headers]. */
async function scripted (answer) {
  const port = await freePort()
  const seen = []
  const server = createServer((req, res) => {
    const chunks = []
    req.on('data', c => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      seen.push({ path: req.url, body, headers: req.headers })
      const [status, json, headers = {}] = answer(req.url, body, seen.length)
      res.writeHead(status, { 'content-type': 'application/json', ...headers })
      res.end(JSON.stringify(json))
    })
  })
  await new Promise(resolve => server.listen(port, '127.0.0.1', resolve))
  return { endpoint: `http://127.0.0.1:${port}`, seen, close: () => new Promise(resolve => server.close(resolve)) }
}

test('an append whose outcome is unknown is resent with the same bytes, on the next endpoint after a refused connection', async () => {
  const dead = `http://127.0.0.1:${await freePort()}` // nobody listens
  const srv = await scripted((path, body, n) => n === 1
    ? [503, connectError('unavailable', 'outcome unknown', 'OUTCOME_UNKNOWN')]
    : [200, { revision: 'r1', nextSeq: '2', duplicate: true }])
  try {
    const c = new Client({ endpoints: [dead, srv.endpoint], initialBackoffMs: 1, maxBackoffMs: 5 })
    const resp = await c.append({ sessionId: 's', events: ['{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'], leaseEpoch: 3, validation: 'VALIDATION_REFERENCE' })
    assert.deepEqual(resp, { revision: 'r1', nextSeq: 2, duplicate: true, readable: undefined, unreadableReason: '', unreadableMessage: '' })
    assert.equal(srv.seen.length, 2)
    assert.equal(srv.seen[0].path, '/sessionstore.v1.SessionPersistence/Append')
    assert.equal(srv.seen[0].body, srv.seen[1].body)
    assert.deepEqual(JSON.parse(srv.seen[0].body), { sessionId: 's', events: ['{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'], leaseEpoch: '3', validation: 'VALIDATION_REFERENCE' })
    assert.equal(c.endpoint, srv.endpoint)
  } finally {
    await srv.close()
  }
})

test('writes go to the endpoint of the leader the hints name, found by health checks; reads stay; a failing leader is left', async () => {
  // Three scripted nodes, n1 and n3 following n2 (the hinted leader address
  // is a gRPC one the client must not use).
  let leaderDown = false
  const node = id => scripted(path => {
    const hints = { 'sessionstore-node': id, 'sessionstore-leader': 'n2=10.0.0.2:7400' }
    if (path === '/healthz') return [200, 'ok', hints]
    if (id === 'n2' && leaderDown) return [503, connectError('unavailable', 'connection reset'), hints]
    return [200, { revision: 'r', nextSeq: '1' }, hints]
  })
  const [n1, n2, n3] = [await node('n1'), await node('n2'), await node('n3')]
  const appends = srv => srv.seen.filter(s => s.path.endsWith('/Append'))
  const append = c => c.append({ sessionId: 's', events: ['{}'] })
  try {
    const c = new Client({ endpoints: [n1.endpoint, n2.endpoint, n3.endpoint], initialBackoffMs: 1, maxBackoffMs: 5 })
    await append(c) // the leader is not known yet: the current endpoint
    assert.equal(appends(n1).length, 1)
    // The answer named n2 as the leader; which endpoint reaches n2 is learnt
    // from the health checks of the endpoints not yet heard from.
    for (let i = 0; i < 200 && appends(n2).length === 0; i++) {
      await append(c)
      await new Promise(resolve => setTimeout(resolve, 5))
    }
    assert.equal(appends(n2).length, 1, 'no write reached the leader')
    const before = appends(n1).length
    await append(c)
    await c.inspect({ sessionId: 's' })
    assert.equal(appends(n2).length, 2, 'writes go to the leader')
    assert.equal(appends(n1).length, before)
    assert.equal(n1.seen.at(-1).path, '/sessionstore.v1.SessionPersistence/Inspect', 'reads stay on the current endpoint')
    assert.deepEqual([n1, n2, n3].map(srv => srv.seen.filter(s => s.path === '/healthz').length), [0, 1, 1])
    // The leader's endpoint fails: the write is resent, same bytes, to the current endpoint.
    leaderDown = true
    await append(c)
    assert.equal(appends(n2).length, 3)
    assert.equal(appends(n1).length, before + 1)
    assert.equal(appends(n1).at(-1).body, appends(n2).at(-1).body)
  } finally {
    await Promise.all([n1.close(), n2.close(), n3.close()])
  }
})

test('a request id is minted once per call and kept by its retries', async () => {
  const srv = await scripted((path, body, n) => n < 3
    ? [503, connectError('unavailable', 'no leader', 'NO_LEADER')]
    : [200, { readable: true }])
  try {
    const c = new Client({ endpoints: [srv.endpoint], initialBackoffMs: 1, maxBackoffMs: 5 })
    await c.create({ header: { version: 0, id: 's', createdAt: 1000 } })
    const ids = srv.seen.map(s => JSON.parse(s.body).requestId)
    assert.equal(ids.length, 3)
    assert.match(ids[0], /^[0-9a-f]{32}$/)
    assert.deepEqual(new Set(ids).size, 1)
    assert.equal(JSON.parse(srv.seen[0].body).header.createdAt, '1000')
    await c.create({ header: { version: 0, id: 's', createdAt: 1000 } })
    assert.notEqual(JSON.parse(srv.seen[3].body).requestId, ids[0])
  } finally {
    await srv.close()
  }
})

test('a definite failure is not retried and keeps the server text', async () => {
  const text = 'append seq mismatch for "s": expected 0 at index 0, got 5'
  const srv = await scripted(() => [400, connectError('failed_precondition', text, 'SEQ_MISMATCH')])
  try {
    const c = new Client({ endpoints: [srv.endpoint], initialBackoffMs: 1 })
    await assert.rejects(c.append({ sessionId: 's', events: ['{}'] }), e => e instanceof SessionStoreError && e.reason === 'SEQ_MISMATCH' && e.message === text && e.definite)
    assert.equal(srv.seen.length, 1)
  } finally {
    await srv.close()
  }
})

test('an aborted call rejects with the signal reason and sends nothing', async () => {
  const srv = await scripted(() => [200, {}])
  try {
    const c = new Client({ endpoints: [srv.endpoint] })
    const reason = new Error('stop')
    const ac = new AbortController()
    ac.abort(reason)
    await assert.rejects(c.inspect({ sessionId: 's' }, { signal: ac.signal }), e => e === reason)
    assert.equal(srv.seen.length, 0)
  } finally {
    await srv.close()
  }
})

test('the token is sent as a bearer credential', async () => {
  const srv = await scripted(() => [200, { headers: [{ version: 0, id: 'a', createdAt: '5' }] }])
  try {
    const c = new Client({ endpoints: [srv.endpoint], token: 'tok' })
    const page = await c.list()
    assert.deepEqual(page, { headers: [{ version: 0, id: 'a', createdAt: 5 }], nextPageToken: '' })
    assert.equal(srv.seen[0].headers.authorization, 'Bearer tok')
    assert.equal(srv.seen[0].headers['connect-protocol-version'], '1')
  } finally {
    await srv.close()
  }
})
