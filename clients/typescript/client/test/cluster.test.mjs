// The client against a real three-node cluster (test/support/cluster.mjs).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Client, LeaseKeeper, SessionStoreError } from '../lib/index.js'
import { Cluster } from './support/cluster.mjs'

let cluster
before(async () => { cluster = await Cluster.start() })
after(async () => { await cluster?.close() })

const ev = (seq, type, data) => JSON.stringify({ type, seq, time: 1000 + seq, data })
const turn = (seq, n) => [ev(seq, 'turn/start', { turn: n }), ev(seq + 1, 'turn/end', { turn: n, reason: { kind: 'completed' } })]
const client = (opts = {}) => new Client({ endpoints: cluster.endpoints, initialBackoffMs: 20, maxBackoffMs: 500, ...opts })

// The title is kept once the cluster's state reaches format 5, which the
// leader proposes as soon as it hears that every voter runs this build.
test('a listed session carries its last title', async () => {
  const c = client()
  const id = 'titled-1'
  await c.create({ header: { version: 0, id, createdAt: 1000, cwd: '/work' } })
  await c.append({ sessionId: id, events: [ev(0, 'session/title', { title: 'first' }), ev(1, 'session/title', { title: 'Fix the <b>build</b> ✓' })] })
  let title
  for (let i = 0; i < 100 && title !== 'Fix the <b>build</b> ✓'; i++) {
    if (i > 0) await new Promise(r => setTimeout(r, 100))
    title = (await c.listSnapshots({ idPrefix: id })).snapshots[0].title
  }
  assert.equal(title, 'Fix the <b>build</b> ✓')
})

test('a session round trip: create, append, load, readFrom, readRaw, list, delete', async () => {
  const c = client()
  const id = 'rt-1'
  const header = { version: 0, id, createdAt: 1000, cwd: '/work' }
  const created = await c.create({ header })
  assert.equal(created.readable, true)
  const a = await c.append({ sessionId: id, events: turn(0, 1) })
  assert.equal(a.nextSeq, 2)
  assert.equal(a.duplicate, false)
  const again = await c.append({ sessionId: id, events: turn(0, 1) })
  assert.equal(again.duplicate, true)
  assert.equal(again.revision, a.revision)
  const view = await c.load({ sessionId: id })
  assert.deepEqual(view.events, turn(0, 1))
  assert.deepEqual(view.header, header)
  assert.equal(view.revision, a.revision)
  const suffix = await c.readFrom({ sessionId: id, fromSeq: 1 })
  assert.deepEqual(suffix.events, turn(0, 1).slice(1))
  assert.equal(suffix.nextSeq, 2)
  const raw = await c.readRaw({ sessionId: id })
  assert.equal(raw.filename, 'session.jsonl')
  assert.equal(new TextDecoder().decode(raw.content),
    '{"type":"session","version":0,"id":"rt-1","createdAt":1000,"cwd":"/work","delegationDepth":0}\n' + turn(0, 1).join('\n') + '\n')
  const snaps = await c.listSnapshotsAll({ idPrefix: 'rt-', order: 'LIST_ORDER_LAST_APPEND', pageSize: 1 })
  assert.deepEqual(snaps.map(s => [s.header.id, s.revision, s.nextSeq, s.leaseHeld, s.title]), [[id, a.revision, 2, false, '']])
  assert.ok(snaps[0].lastAppendUnixMs > 0)
  const stale = await c.inspect({ sessionId: id, consistency: 'STALE' })
  assert.equal(stale.nextSeq >= 0, true)
  assert.equal(await c.delete({ sessionId: id }), a.revision)
  await assert.rejects(c.load({ sessionId: id }), e => e instanceof SessionStoreError && e.reason === 'NOT_FOUND' && e.message === 'session "rt-1" not found')
})

test('errors carry the reason and the reference text', async () => {
  const c = client()
  await c.create({ header: { version: 0, id: 'err-1', createdAt: 1 } })
  await c.append({ sessionId: 'err-1', events: turn(0, 1) })
  await assert.rejects(c.append({ sessionId: 'err-1', events: [ev(5, 'turn/start', { turn: 2 })] }),
    e => e.reason === 'SEQ_MISMATCH' && e.code === 'failed_precondition' && e.message === 'append seq mismatch for "err-1": expected 2 at index 0, got 5' && e.definite)
  await assert.rejects(c.create({ header: { version: 0, id: 'err-1', createdAt: 2 } }), e => e.reason === 'ALREADY_EXISTS')
})

test('a lease keeper holds a lease past its ttl, and a takeover fences it', async () => {
  const c = client()
  const id = 'lease-1'
  await c.create({ header: { version: 0, id, createdAt: 1 } })
  await c.append({ sessionId: id, events: turn(0, 1) })
  const { lease } = await c.prepare({ sessionId: id, owner: 'host-a', ttlMs: 600 })
  let lost
  const keeper = new LeaseKeeper(c, lease, { ttlMs: 600, onLost: e => { lost = e } })
  await new Promise(resolve => setTimeout(resolve, 1500))
  await c.append({ sessionId: id, events: turn(2, 2), leaseEpoch: keeper.epoch })
  await assert.rejects(c.prepare({ sessionId: id, owner: 'host-b', ttlMs: 600 }), e => e.reason === 'SESSION_LIVE')
  await keeper.stop() // host A stalls
  await new Promise(resolve => setTimeout(resolve, 800))
  const taken = await c.prepare({ sessionId: id, owner: 'host-b', ttlMs: 5000 })
  assert.equal(taken.lease.epoch, lease.epoch + 1)
  await assert.rejects(c.append({ sessionId: id, events: turn(4, 3), leaseEpoch: lease.epoch }), e => e.reason === 'LEASE_FENCED')
  const stale = new LeaseKeeper(c, lease, { ttlMs: 300, onLost: e => { lost = e } })
  await new Promise(resolve => setTimeout(resolve, 500))
  assert.equal(lost?.reason, 'LEASE_FENCED')
  assert.equal(stale.lost, lost)
  await c.release({ sessionId: id, leaseEpoch: taken.lease.epoch })
})

test('a watch resumes on another node when its node is killed', async () => {
  const id = 'watch-kill'
  const writer = client()
  await writer.create({ header: { version: 0, id, createdAt: 1 } })
  await writer.append({ sessionId: id, events: turn(0, 1) })
  const victim = cluster.nodes[2]
  const watcher = new Client({ endpoints: [victim.endpoint, cluster.nodes[0].endpoint, cluster.nodes[1].endpoint], initialBackoffMs: 20 })
  const resumes = []
  const w = watcher.watch({ sessionId: id, fromSeq: 0 }, { idleTimeoutMs: 15_000, onResume: (e, next) => resumes.push(next) })
  const seen = []
  const reading = (async () => {
    for await (const b of w) {
      seen.push(...b.events)
      if (seen.length >= 8) break
    }
  })()
  for (let i = 0; seen.length < 2; i++) {
    assert.ok(i < 500, 'the watch delivered the first batch')
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  await victim.kill()
  for (let s = 2; s < 8; s += 2) await writer.append({ sessionId: id, events: turn(s, s / 2 + 1) })
  await reading
  assert.deepEqual(seen, [0, 2, 4, 6].flatMap(s => turn(s, s / 2 + 1)))
  assert.ok(resumes.length >= 1, 'the watch was resumed')
  assert.equal(resumes[0], 2)
  victim.start()
  await cluster.waitReady()
})

test('an idle watch survives', async () => {
  const idleSeconds = Number(process.env.SESSIONSTORE_TS_IDLE_WATCH_SECONDS || 12)
  const id = 'watch-idle'
  const c = client()
  await c.create({ header: { version: 0, id, createdAt: 1 } })
  await c.append({ sessionId: id, events: turn(0, 1) })
  let resumes = 0
  const w = c.watch({ sessionId: id, fromSeq: 2 }, { idleTimeoutMs: 45_000, onResume: () => { resumes++ } })
  let progress = 0
  const got = []
  const reading = (async () => {
    for await (const b of w) {
      if (b.events.length === 0) progress++
      got.push(...b.events)
      if (got.length >= 2) break
    }
  })()
  await new Promise(resolve => setTimeout(resolve, idleSeconds * 1000))
  await c.append({ sessionId: id, events: turn(2, 2) })
  await reading
  assert.deepEqual(got, turn(2, 2))
  assert.equal(resumes, 0, 'the same stream carried the events after the idle time')
  assert.ok(progress >= Math.floor(idleSeconds / 30), `progress messages while idle: ${progress}`)
}, { timeout: 600_000 })

test('plan mode and the cluster service', async () => {
  const c = client()
  const id = 'plan-1'
  await c.create({ header: { version: 0, id, createdAt: 1, cwd: '/w' } })
  await c.append({ sessionId: id, events: turn(0, 1) })
  const set = await c.planSet({ sessionId: id, active: true })
  assert.equal(set.outcome, 'COMMITTED')
  assert.equal(set.nextSeq, 3)
  assert.equal(JSON.parse(set.appendedEvents[0]).type, 'plan/mode')
  assert.deepEqual(await c.planGet({ sessionId: id }), { active: true, pending: undefined, nextSeq: 3 })
  const st = await c.status()
  assert.ok(['Leader', 'Follower'].includes(st.state))
  assert.match(st.clusterId, /./)
  const members = await c.members()
  assert.equal(members.length, 3)
  const self = members.find(m => m.nodeId === st.nodeId)
  assert.equal(self.appliedIndex > 0 && self.diskFreeBytes > 0 && self.diskLow === false && self.commandVersion > 0, true)
})
