// The persistence contract's checklist C1–C12 (docs/contract.md) through the
// adapter's service surface, against a real three-node cluster; then the
// error classes and texts of the harness (docs/api.md#errors).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { RemoteSessionPersistence } from '../lib/persistence.js'
import { Cluster } from '../../client/test/support/cluster.mjs'
import { CWD, meta, oneTurnLog, turnStart, turnEnd, stepStart, types, seqs } from './fixtures.mjs'

let cluster
let p
before(async () => {
  cluster = await Cluster.start()
  p = new RemoteSessionPersistence({ endpoints: cluster.endpoints, owner: 'contract-host' })
})
after(async () => {
  await p?.close()
  await cluster?.close()
})

const revisionOf = async id => (await p.listSnapshots()).find(s => s.header.id === id)?.revision

test('C1 round-trips a session: create + append, then load gives the same header and events', async () => {
  await p.create(meta('s1', CWD))
  await p.append('s1', oneTurnLog())
  const loaded = await p.load('s1')
  assert.deepEqual({ version: loaded.meta.version, id: loaded.meta.id, cwd: loaded.meta.cwd }, { version: 0, id: 's1', cwd: CWD })
  assert.deepEqual(loaded.events, oneTurnLog())
  assert.ok(Object.isFrozen(loaded.events[1].data), 'loaded events are immutable')
  assert.throws(() => { loaded.events[1].data.id = 'changed' }, TypeError)
})

test('C2 a fractional createdAt is refused and reserves nothing', async () => {
  await assert.rejects(p.create({ version: 0, id: 'c2', createdAt: 1.5 }),
    e => e instanceof TypeError && e.message.includes('session metadata createdAt must be a non-negative safe integer'))
  await p.create({ version: 0, id: 'c2', createdAt: 1000 })
  await p.append('c2', oneTurnLog())
  assert.equal((await p.load('c2')).meta.createdAt, 1000)
})

test('C3 load keeps an interrupted turn and closes it with turn/end {interrupted}', async () => {
  const id = 'c3'
  await p.create(meta(id, CWD))
  await p.append(id, oneTurnLog())
  await p.append(id, [turnStart(6, 2, 7), stepStart(7, 2, 1, 8)])
  const r0 = await revisionOf(id)
  const want = ['turn/start', 'user/message', 'step/start', 'assistant/message', 'step/end', 'turn/end', 'turn/start', 'step/start', 'step/end', 'turn/end']
  const inspected = await p.inspect(id)
  assert.deepEqual(types(inspected.events), want)
  assert.equal(await revisionOf(id), r0, 'inspect commits nothing')
  const loaded = await p.load(id)
  assert.deepEqual(types(loaded.events), want)
  assert.deepEqual(seqs(loaded.events), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  assert.deepEqual(loaded.events[9].data.reason, { kind: 'interrupted' })
  assert.notEqual(await revisionOf(id), r0, 'load committed the repair')
  await p.append(id, [turnStart(10, 3), turnEnd(11, 3)])
  assert.deepEqual(seqs((await p.load(id)).events), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
})

test('C4 a tool call asked for but never started gets a retryable result', async () => {
  const id = 'c4'
  await p.create(meta(id, CWD))
  await p.append(id, oneTurnLog())
  await p.append(id, [turnStart(6, 2), stepStart(7, 2, 1), {
    type: 'assistant/message', seq: 8, time: 9, surfaceOp: 'append',
    data: { turn: 2, step: 1, message: { id: 'c4-a', role: 'assistant', content: [{ type: 'tool-call', id: 'call-x', name: 'bash', arguments: '{}' }], source: { kind: 'model', provider: 'mock', model: 'mock' } } },
  }])
  const ev = (await p.load(id)).events
  assert.deepEqual(types(ev).slice(-6), ['turn/start', 'step/start', 'assistant/message', 'tool/result', 'step/end', 'turn/end'])
  const result = ev.at(-3).data
  assert.deepEqual(result.message.source, { kind: 'tool', callId: 'call-x' })
  assert.equal(result.message.content[0].type, 'tool-result')
  assert.equal(result.message.content[0].toolCallId, 'call-x')
  assert.equal(result.message.content[0].isError, true)
  assert.equal(result.error.code, 'TOOL_NOT_STARTED')
  assert.equal(ev.at(-4).data.message.content[0].id, 'call-x')
})

test('C5 a recorded tool call without a result tells the model to weigh the retry', async () => {
  const id = 'c5'
  await p.create(meta(id, CWD))
  await p.append(id, [turnStart(0, 1), stepStart(1, 1, 1), {
    type: 'assistant/message', seq: 2, time: 3, surfaceOp: 'append',
    data: { turn: 1, step: 1, message: { id: 'c5-a', role: 'assistant', content: [{ type: 'tool-call', id: 'call-risk', name: 'write', arguments: '{}' }], source: { kind: 'model', provider: 'mock', model: 'mock' } } },
  }, { type: 'tool/call', seq: 3, time: 4, data: { turn: 1, step: 1, callId: 'call-risk', name: 'write', arguments: '{}' } }])
  const result = (await p.load(id)).events.find(e => e.type === 'tool/result')
  assert.deepEqual(result.data.error, { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' })
  const text = result.data.message.content[0].content[0].text
  assert.ok(text.includes('retry only if the operation is read-only or idempotent'))
  assert.ok(text.includes('if it may have side effects, first verify external state or ask the user'))
  assert.deepEqual(result.data.message.content[0], { ...result.data.message.content[0], type: 'tool-result', toolCallId: 'call-risk', isError: true })
})

test('C6 a session created but never appended to is not listed', async () => {
  await p.create(meta('empty'))
  await p.append('empty', [])
  assert.ok(!(await p.list()).some(h => h.id === 'empty'))
  assert.ok(!(await p.listSnapshots()).some(s => s.header.id === 'empty'))
})

test('C7 reads cancelled before they start reject with the exact reason', async () => {
  const live = new AbortController()
  assert.ok(Array.isArray(await p.listSnapshots(live.signal)))
  const reason = new Error('cancelled by the test')
  const ac = new AbortController()
  ac.abort(reason)
  for (const [name, call] of [
    ['list', () => p.list(ac.signal)],
    ['listSnapshots', () => p.listSnapshots(ac.signal)],
    ['inspect', () => p.inspect('cancelled-inspect', ac.signal)],
    ['readFrom', () => p.readFrom('cancelled-read-from', 0, ac.signal)],
    ['readRaw', () => p.readRaw('cancelled-read-raw', ac.signal)],
  ]) {
    await assert.rejects(call(), e => e === reason, name)
  }
})

test('C8 readFrom returns exactly the stored suffix and changes nothing', async () => {
  const id = 'read-from'
  await p.create(meta(id, CWD))
  await p.append(id, oneTurnLog())
  const rev = await revisionOf(id)
  const whole = await p.readFrom(id, 0)
  assert.equal(whole.meta.id, id)
  assert.equal(whole.meta.cwd, CWD)
  assert.deepEqual(whole.events, oneTurnLog())
  const tail = await p.readFrom(id, 3)
  assert.deepEqual(tail.events, oneTurnLog().slice(3))
  assert.equal(tail.events[0].seq, 3)
  assert.deepEqual((await p.readFrom(id, 6)).events, [])
  assert.deepEqual((await p.readFrom(id, 106)).events, [])
  assert.equal(await revisionOf(id), rev)
  await p.append(id, [turnStart(6, 2)])
  assert.deepEqual(types((await p.readFrom(id, 6)).events), ['turn/start'])
  await assert.rejects(p.readFrom('absent-read-from', 0), e => e.constructor === Error && /not found/.test(e.message))
  for (const bad of [-1, 1.5]) {
    await assert.rejects(p.readFrom(id, bad), e => e instanceof TypeError && /non-negative safe integer/.test(e.message))
  }
})

test('C9 listed revisions are stable and change after an append', async () => {
  await p.create(meta('s2'))
  await p.append('s2', oneTurnLog())
  assert.ok((await p.list()).some(h => h.id === 's2'))
  const a = await revisionOf('s2')
  assert.equal(await revisionOf('s2'), a)
  await p.append('s2', [turnStart(6, 2)])
  assert.notEqual(await revisionOf('s2'), a)
})

test('C10 an append whose first seq is not the stored next seq is refused', async () => {
  await p.create(meta('c10'))
  await p.append('c10', oneTurnLog())
  // The same batch again is an acknowledged retry, answered as a duplicate
  // (docs/contract.md#c10); other bytes at the stored seqs are refused.
  await p.append('c10', oneTurnLog())
  const other = oneTurnLog().map(e => ({ ...e, time: e.time + 100 }))
  await assert.rejects(p.append('c10', other), e => e instanceof Error && /append seq mismatch for "c10"/.test(e.message))
  await assert.rejects(p.append('c10', [turnStart(7, 2)]), e => e.message === 'append seq mismatch for "c10": expected 6 at index 0, got 7')
})

test('C11 an append with a seq gap inside the batch is refused, writing nothing', async () => {
  await p.create(meta('c11'))
  await assert.rejects(p.append('c11', [turnStart(0, 1), stepStart(2, 1, 1)]), /seq mismatch/)
  assert.ok(!(await p.list()).some(h => h.id === 'c11'))
})

test('C12 data that is not lossless JSON is refused, naming the event type', async () => {
  const cyclic = {}
  cyclic.self = cyclic
  const bad = [1n, undefined, Infinity, () => 1, Symbol('s'), new Map(), cyclic]
  for (const [i, value] of bad.entries()) {
    const id = `c12-${i}`
    await p.create(meta(id))
    const event = { ...oneTurnLog()[1], seq: 0, data: { ...oneTurnLog()[1].data, extra: value } }
    await assert.rejects(p.append(id, [event]), e => e instanceof TypeError && /losslessly JSON-serializable/.test(e.message) && e.message.includes('"user/message"'), String(i))
    assert.ok(!(await p.list()).some(h => h.id === id))
  }
})

test('errors: a newer format version is SessionFormatUnsupportedError with the upgrade text', async () => {
  await p.create({ version: 99, id: 'v99', createdAt: 1, cwd: '/w' })
  await p.append('v99', oneTurnLog())
  await assert.rejects(p.load('v99'), e => e.name === 'SessionFormatUnsupportedError' &&
    /^session "v99" uses log format v99, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it/.test(e.message))
  await p.create({ version: -1, id: 'v-1', createdAt: 1, cwd: '/w' })
  await p.append('v-1', oneTurnLog())
  await assert.rejects(p.inspect('v-1'), e => e.name === 'SessionFormatUnsupportedError' && /older than the supported v0.*no upgrade path/.test(e.message))
})

test('errors: an unknown event type is refused on load unless ignorable', async () => {
  await p.create(meta('future', '/w'))
  await p.append('future', [...oneTurnLog(), { type: 'future/event', seq: 6, time: 99, data: { payload: 1 } }])
  await assert.rejects(p.load('future'), e => e.name === 'SessionFormatUnsupportedError' && /event type "future\/event".*not marked ignorable/.test(e.message))
  await p.create(meta('future-ok', '/w'))
  await p.append('future-ok', [...oneTurnLog(), { type: 'future/event', seq: 6, time: 99, data: { payload: 1 }, ignorable: true }])
  assert.equal((await p.load('future-ok')).events.at(-1).type, 'future/event')
})

test('errors: a malformed stored event is SessionPersistenceCorruptionError on load, a plain Error on readFrom', async () => {
  const id = 'k11'
  await p.create(meta(id, '/w'))
  const log = oneTurnLog()
  log[1] = { ...log[1], data: { ...log[1].data, role: 'assistant' } }
  await p.append(id, log)
  for (const call of [() => p.load(id), () => p.inspect(id)]) {
    await assert.rejects(call(), e => e.name === 'SessionPersistenceCorruptionError' &&
      e.message.startsWith(`stored session "${id}" failed validation: Error: `) && e.message.includes('message must have role "user"') &&
      e.cause instanceof Error && !e.cause.message.startsWith('Error: '))
  }
  await assert.rejects(p.readFrom(id, 0), e => e.constructor === Error && e.message.includes('message must have role "user"'))
})

test('errors: create of a used id and load of a missing one keep the reference texts', async () => {
  await assert.rejects(p.create(meta('s1', CWD)), e => e.constructor === Error && /session "s1"/.test(e.message))
  await assert.rejects(p.load('nope'), e => e.constructor === Error && e.message === 'session "nope" not found')
  await assert.rejects(p.inspect('nope'), e => e.message === 'session "nope" not found')
  assert.equal(await p.readRaw('nope'), undefined)
  assert.equal(p.supportsRawArtifacts, true)
  assert.equal(p.locate(meta('s1', CWD)), undefined)
  const where = await p.locateRemote(meta('s1', CWD))
  assert.equal(where.kind, 'jsonl')
  assert.match(where.url, /\/v1\/sessions\/s1\/session\.jsonl/)
})
