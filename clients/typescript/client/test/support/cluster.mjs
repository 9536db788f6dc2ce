// A real three-node cluster for the tests: the sessionstore binary (built by
// build.mjs, or SESSIONSTORE_BIN), three processes on free loopback ports,
// each in its own data directory. Nodes can be killed (SIGKILL) and started
// again on the same directory and ports.

import { spawn } from 'node:child_process'
import { mkdtempSync, openSync, closeSync, rmSync, existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))

/** The binary the tests run: SESSIONSTORE_BIN, else the one build.mjs made. */
export function binaryPath () {
  const p = process.env.SESSIONSTORE_BIN || join(here, '..', '.bin', 'sessionstore')
  if (!existsSync(p)) throw new Error(`no sessionstore binary at ${p}: run "node test/support/build.mjs" (npm test does) or set SESSIONSTORE_BIN`)
  return p
}

/** A TCP port nobody listens on now (the OS picks it). */
export function freePort () {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.unref()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

export class Node {
  constructor (cluster, id, ports) {
    this.cluster = cluster
    this.id = id
    this.ports = ports
    this.dir = join(cluster.root, id)
    this.proc = undefined
  }

  get endpoint () { return `http://127.0.0.1:${this.ports.http}` }
  get gossip () { return `127.0.0.1:${this.ports.gossip}` }

  start () {
    const others = this.cluster.nodes.filter(n => n !== this).map(n => n.gossip).join(',')
    const args = ['serve', '--node-id', this.id, '--data-dir', this.dir,
      '--grpc-addr', `127.0.0.1:${this.ports.grpc}`, '--http-addr', `127.0.0.1:${this.ports.http}`,
      '--raft-addr', `127.0.0.1:${this.ports.raft}`, '--gossip-addr', this.gossip,
      '--join', others, '--bootstrap-expect', '3', ...this.cluster.extraArgs]
    const log = openSync(join(this.cluster.root, `${this.id}.log`), 'a')
    this.proc = spawn(binaryPath(), args, { stdio: ['ignore', log, log] })
    closeSync(log)
    const proc = this.proc
    this.exited = new Promise(resolve => proc.once('exit', resolve))
  }

  /** SIGKILL: no hand-over, no flush beyond what fsync already made durable. */
  async kill () {
    if (this.proc === undefined) return
    this.proc.kill('SIGKILL')
    await this.exited
    this.proc = undefined
  }

  async stop () {
    if (this.proc === undefined) return
    this.proc.kill('SIGTERM')
    const t = setTimeout(() => this.proc?.kill('SIGKILL'), 10_000)
    await this.exited
    clearTimeout(t)
    this.proc = undefined
  }

  async ready () {
    try {
      const res = await fetch(`${this.endpoint}/readyz`, { signal: AbortSignal.timeout(2000) })
      await res.text()
      return res.status === 200
    } catch {
      return false
    }
  }

  log () {
    try { return readFileSync(join(this.cluster.root, `${this.id}.log`), 'utf8') } catch { return '' }
  }
}

export class Cluster {
  /** Starts three nodes and waits until every one is ready. */
  static async start ({ extraArgs = [] } = {}) {
    const c = new Cluster()
    c.root = mkdtempSync(join(tmpdir(), 'sessionstore-ts-'))
    c.extraArgs = extraArgs
    c.nodes = []
    for (const id of ['n1', 'n2', 'n3']) {
      const ports = { grpc: await freePort(), http: await freePort(), raft: await freePort(), gossip: await freePort() }
      c.nodes.push(new Node(c, id, ports))
    }
    for (const n of c.nodes) n.start()
    await c.waitReady(c.nodes, 60_000)
    return c
  }

  get endpoints () { return this.nodes.map(n => n.endpoint) }

  async waitReady (nodes = this.nodes, ms = 60_000) {
    const deadline = Date.now() + ms
    for (;;) {
      const ready = await Promise.all(nodes.map(n => n.ready()))
      if (ready.every(Boolean)) return
      if (Date.now() > deadline) {
        throw new Error(`cluster not ready in ${ms} ms:\n` + nodes.map(n => `--- ${n.id}\n${n.log().slice(-3000)}`).join('\n'))
      }
      await sleep(200)
    }
  }

  /** The node that says it is the leader (by the Cluster service's Status). */
  async leader () {
    for (let i = 0; i < 100; i++) {
      for (const n of this.nodes) {
        if (n.proc === undefined) continue
        try {
          const res = await fetch(`${n.endpoint}/sessionstore.v1.Cluster/Status`, {
            method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', signal: AbortSignal.timeout(2000),
          })
          const st = await res.json()
          if (st.state === 'Leader') return n
        } catch { /* try the next */ }
      }
      await sleep(100)
    }
    throw new Error('no leader')
  }

  async close () {
    await Promise.all(this.nodes.map(n => n.stop()))
    if (!process.env.SESSIONSTORE_KEEP_TEST_DIRS) rmSync(this.root, { recursive: true, force: true })
  }
}
