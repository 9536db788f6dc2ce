// Fixtures of the persistence contract's checklist (docs/contract.md).

export const CWD = '/work'

export const meta = (id, cwd) => (cwd === undefined ? { version: 0, id, createdAt: 1000 } : { version: 0, id, createdAt: 1000, cwd })

/** The contract's six-event turn, times 1…6. */
export function oneTurnLog () {
  return [
    { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
    { type: 'user/message', seq: 1, time: 2, data: { id: 'one-turn-user', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, surfaceOp: 'append' },
    { type: 'step/start', seq: 2, time: 3, data: { turn: 1, step: 1 } },
    { type: 'assistant/message', seq: 3, time: 4, data: { turn: 1, step: 1, message: { id: 'one-turn-assistant', role: 'assistant', content: [{ type: 'text', text: 'hello' }], source: { kind: 'model', provider: 'mock', model: 'mock' } } }, surfaceOp: 'append' },
    { type: 'step/end', seq: 4, time: 5, data: { turn: 1, step: 1 } },
    { type: 'turn/end', seq: 5, time: 6, data: { turn: 1, reason: { kind: 'completed' } } },
  ]
}

export const turnStart = (seq, turn, time = seq + 1) => ({ type: 'turn/start', seq, time, data: { turn } })
export const turnEnd = (seq, turn, time = seq + 1) => ({ type: 'turn/end', seq, time, data: { turn, reason: { kind: 'completed' } } })
export const stepStart = (seq, turn, step, time = seq + 1) => ({ type: 'step/start', seq, time, data: { turn, step } })

export const types = events => events.map(e => e.type)
export const seqs = events => events.map(e => e.seq)

/** A stand-in for the harness's live Session: the members the write path reads. */
export class FakeSession {
  constructor (header, seed = []) {
    this.header = header
    this.log = [...seed]
    this.firstLiveSeq = seed.length
  }

  get id () { return this.header.id }
  get events () { return this.log }

  /** Appends an event and announces it, as Session.append and session/event do. */
  append (persistence, event) {
    this.log.push(event)
    persistence.admit(this, event)
  }
}

/**
 * The logical events of a reference JSONL file: each line one event, packed
 * chunk rows expanded into their assistant/chunk members (docs/events.md#packed-rows).
 */
export function logicalEvents (lines) {
  const out = []
  for (const line of lines) {
    const r = JSON.parse(line)
    if (r.type === 'text-chunks' || r.type === 'reasoning-chunks' || r.type === 'tool-call-chunks') {
      const d = r.data
      const n = (d.texts ?? d.args).length
      let time = r.time0
      for (let k = 0; k < n; k++) {
        if (k > 0) time += d.dt[k - 1]
        let chunk
        if (r.type === 'tool-call-chunks') {
          chunk = { type: 'tool-call-delta', index: d.index, id: d.id }
          if (d.name !== undefined) chunk.name = d.name
          chunk.argumentsDelta = d.args[k]
        } else {
          chunk = { type: r.type === 'text-chunks' ? 'text-delta' : 'reasoning-delta', index: d.index, text: d.texts[k] }
        }
        out.push({ type: 'assistant/chunk', seq: r.seq0 + k, time, data: { turn: d.turn, step: d.step, chunk } })
      }
    } else {
      out.push(r)
    }
  }
  return out
}
