// The harness's lossless-JSON domain (docs/events.md#lossless-json): what a
// JSON round trip gives back unchanged. Checked here, before anything is
// sent, because JSON.stringify would silently drop or change the rest
// (undefined, functions, symbols, NaN, -0, Maps, sparse arrays).

/** Why value is not lossless JSON, or undefined when it is. */
export function losslessProblem(value: unknown): string | undefined {
  return check(value, new Set())
}

function check(v: unknown, path: Set<object>): string | undefined {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return undefined
    case 'number':
      if (!Number.isFinite(v)) return `non-finite number ${String(v)}`
      if (Object.is(v, -0)) return 'negative zero'
      return undefined
    case 'object':
      break
    default:
      return `a value of type ${typeof v}`
  }
  if (v === null) return undefined
  if (path.has(v)) return 'a cyclic structure'
  path.add(v)
  try {
    if (Array.isArray(v)) {
      const keys = Object.keys(v)
      if (keys.length !== v.length || Object.getOwnPropertySymbols(v).length > 0) return 'an array with holes or extra properties'
      for (let i = 0; i < v.length; i++) {
        const p = check(v[i], path)
        if (p !== undefined) return p
      }
      return undefined
    }
    const proto: unknown = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) return 'an object that is not a plain object'
    if (Object.getOwnPropertySymbols(v).length > 0) return 'an object with symbol keys'
    for (const [, e] of Object.entries(v)) {
      const p = check(e, path)
      if (p !== undefined) return p
    }
    return undefined
  } finally {
    path.delete(v)
  }
}
