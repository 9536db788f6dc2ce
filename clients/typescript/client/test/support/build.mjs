// Builds the node binary the tests run (test/.bin/sessionstore) from the
// repository's Go sources, unless SESSIONSTORE_BIN names one already.

import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

if (!process.env.SESSIONSTORE_BIN) {
  const here = dirname(fileURLToPath(import.meta.url))
  const repo = join(here, '..', '..', '..', '..', '..')
  const out = join(here, '..', '.bin', 'sessionstore')
  execFileSync('go', ['build', '-o', out, './cmd/node'], { cwd: repo, stdio: 'inherit' })
}
