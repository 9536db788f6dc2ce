// Without a registry, the sibling client package stands in for the
// installed dependency: it is built and linked as node_modules/@sessionstore/client.

import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, symlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const client = join(pkg, '..', 'client')
execFileSync('tsc', ['-p', client], { stdio: 'inherit' })
execFileSync('node', [join(client, 'test', 'support', 'build.mjs')], { stdio: 'inherit' })
mkdirSync(join(pkg, 'node_modules', '@sessionstore'), { recursive: true })
const link = join(pkg, 'node_modules', '@sessionstore', 'client')
rmSync(link, { recursive: true, force: true })
symlinkSync(join('..', '..', '..', 'client'), link, 'dir')
