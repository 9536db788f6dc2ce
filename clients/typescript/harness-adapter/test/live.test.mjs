// The live-write path and the recorded sessions, against a real three-node
// cluster: write-behind batches under a lease, a takeover by a second host
// fencing the first, and a node killed mid-write losing nothing.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { RemoteSessionPersistence } from '../lib/persistence.js'
import { Cluster } from '../../client/test/support/cluster.mjs'
import { FakeSession, logicalEvents, oneTurnLog, turnStart, turnEnd, types } from './fixtures.mjs'

const recorded = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'testdata', 'recorded')

let cluster
const opened = []
before(async () => { cluster = await Cluster.start() })
after(async () => {
  for (const p of opened) await p.close().catch(() => {})
  await cluster?.close()
})

function persistence (config = {}) {
  const warnings = []
  const p = new RemoteSessionPersistence({ endpoints: cluster.endpoints, writeBatchMaxDelayMs: 20, ...config }, { warn: m => warnings.push(m) })
  p.warnings = warnings
  opened.push(p)
  return p
}

/** The text ReadRaw must give for a header and events: header line, then one JSON line per event. */
function rawText (header, events) {
  const { type, ...h } = header
  const line = JSON.stringify({ type: 'session', ...h, delegationDepth: h.delegationDepth ?? 0 })
  return [line, ...events.map(e => JSON.stringify(e))].join('\n') + '\n'
}

for (const file of readdirSync(recorded).filter(f => f.endsWith('.session.jsonl'))) {
  test(`recorded session ${file}: appended and read back byte for byte, through the service and through a live Session`, async () => {
    const lines = readFileSync(join(recorded, file), 'utf8').split('\n').filter(l => l !== '')
    const { type, ...header } = JSON.parse(lines[0])
    const events = logicalEvents(lines.slice(1))
    assert.deepEqual(events.map(e => e.seq), events.map((_, i) => i))
    const p = persistence()

    // Through the service, in batches of 7.
    await p.create(header)
    for (let i = 0; i < events.length; i += 7) await p.append(header.id, events.slice(i, i + 7))
    const raw = await p.readRaw(header.id)
    assert.equal(raw.filename, 'session.jsonl')
    assert.equal(raw.content, rawText(header, events))
    assert.equal(raw.content.split('\n')[0], lines[0], 'the header line is the recorded one')
    const storedLines = new Set(raw.content.split('\n'))
    for (const l of lines.slice(1)) {
      if (!/^\{"type":"(text|reasoning|tool-call)-chunks"/.test(l)) assert.ok(storedLines.has(l), `recorded line kept byte for byte: ${l.slice(0, 80)}`)
    }
    const readBack = await p.readFrom(header.id, 0)
    assert.equal(readBack.events.length, events.length)

    // Through a live Session: write-behind batches, then a flush.
    const live = new FakeSession({ ...header, id: `${header.id}-live` })
    p.bind(live)
    for (const e of events) {
      live.append(p, e)
      if (e.seq % 10 === 0) await new Promise(resolve => setTimeout(resolve, 25))
    }
    await p.flush(live)
    assert.equal((await p.readRaw(live.id)).content, rawText(live.header, events))
    p.retire(live)
  })
}

test('a live Session takes a lease once its log is balanced, and releases it when disposed', async () => {
  const p = persistence({ owner: 'host-live', leaseTtlMs: 2000 })
  const s = new FakeSession({ version: 0, id: 'live-lease', createdAt: 1, cwd: '/w' })
  p.bind(s)
  const log = oneTurnLog()
  for (const e of log.slice(0, 3)) s.append(p, e)
  await p.flush(s)
  assert.equal(p.leaseOf(s), undefined, 'no lease while the first turn is open')
  for (const e of log.slice(3)) s.append(p, e)
  await p.flush(s)
  const keeper = p.leaseOf(s)
  assert.ok(keeper !== undefined)
  assert.equal(keeper.lease.owner, 'host-live')
  s.append(p, turnStart(6, 2))
  await p.flush(s)
  // Under the live lease with its turn open, a load elsewhere is refused.
  const other = persistence({ owner: 'host-other' })
  await assert.rejects(other.load('live-lease'), /cannot load session "live-lease" while its live turn is open/)
  s.append(p, turnEnd(7, 2))
  p.retire(s)
  await p.load('live-lease') // waits for the retirement
  const loaded = await other.load('live-lease')
  assert.deepEqual(types(loaded.events).slice(-2), ['turn/start', 'turn/end'])
  assert.equal(loaded.events.length, 8)
  // Released: another owner can take it at once.
  const taken = await other.client.prepare({ sessionId: 'live-lease', owner: 'host-other', ttlMs: 1000 })
  assert.equal(taken.lease.epoch, keeper.lease.epoch + 1)
})

test('a lease taken over by a second host fences the first', async () => {
  const id = 'takeover'
  const a = persistence({ owner: 'host-a', leaseTtlMs: 1000 })
  const b = persistence({ owner: 'host-b', leaseTtlMs: 5000 })
  const sa = new FakeSession({ version: 0, id, createdAt: 1, cwd: '/w' })
  a.bind(sa)
  for (const e of oneTurnLog()) sa.append(a, e)
  await a.flush(sa)
  const leaseA = a.leaseOf(sa)
  assert.ok(leaseA !== undefined)
  // Host A stalls: no renewal; its lease runs out.
  await leaseA.stop()
  await new Promise(resolve => setTimeout(resolve, 1300))
  // Host B resumes the session as the harness does: load, then a Session
  // seeded with the loaded log and its session/end-seed.
  const loaded = await b.load(id)
  const sb = new FakeSession(loaded.meta, [...loaded.events, { type: 'session/end-seed', seq: 6, time: 50, data: {} }])
  b.bind(sb)
  await b.flush(sb)
  assert.equal(b.leaseOf(sb).epoch, leaseA.epoch + 1)
  // Host A writes on: fenced, surfaced by its flush and logged.
  sa.append(a, turnStart(6, 2))
  await assert.rejects(a.flush(sa), e => e instanceof Error && /fenced/.test(e.message))
  assert.ok(a.warnings.some(w => w.includes(`session "${id}" is fenced`)), a.warnings.join('\n'))
  await assert.rejects(a.flush(sa), /fenced/)
  const stored = await b.readFrom(id, 0)
  assert.deepEqual(types(stored.events), [...types(oneTurnLog()), 'session/end-seed'])
  sb.append(b, turnStart(7, 2))
  sb.append(b, turnEnd(8, 2))
  await b.flush(sb)
  assert.equal((await b.readFrom(id, 7)).events.length, 2)
})

test('a node killed mid-write loses nothing', async () => {
  const p = persistence({ owner: 'host-kill', writeBatchMaxDelayMs: 5 })
  const s = new FakeSession({ version: 0, id: 'kill-mid-write', createdAt: 1, cwd: '/w' })
  p.bind(s)
  const leader = await cluster.leader()
  const written = []
  for (let t = 1; t <= 60; t++) {
    const seq = 2 * (t - 1)
    for (const e of [turnStart(seq, t), turnEnd(seq + 1, t)]) {
      s.append(p, e)
      written.push(e)
    }
    if (t === 20) await leader.kill()
    await new Promise(resolve => setTimeout(resolve, 3))
  }
  await p.flush(s)
  const raw = await p.readRaw('kill-mid-write')
  assert.equal(raw.content, rawText(s.header, written))
  leader.start()
  await cluster.waitReady()
})
