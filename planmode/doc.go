// Package planmode is the plan mode of the reference harness
// (docs/planmode.md; package @deepseek-ai/dsh-plan-mode 0.1.0-rc.8)
// re-implemented as pure functions over a session's stored events, for the
// replicated session store's PlanMode service (docs/api.md).
//
// Every function here is pure and deterministic: it reads the events it is
// given (each one verbatim stored JSON text), the replicated plan-mode State
// it is given, and explicit parameters (the seq and time to stamp, command and
// message ids). It never reads the clock, randomness or any global state, and
// it never appends anything itself: it returns the exact event texts to append,
// serialised as JavaScript's JSON.stringify writes them (reference key order,
// no HTML escaping), and the new State. A deterministic FSM can therefore call
// it inside Apply and every replica appends the same bytes.
//
// Deliberate differences from the in-process reference (docs/deviations.md
// "Plan mode"): the pending selection and the approved silent exit are part of
// the replicated State instead of process memory (limitations L2, L6, L9 of
// docs/planmode.md#differences), and the server never writes agent/inbox/spliced: the narration
// notice an idle commit would inject is owed in State and returned by the
// next PreStep instead.
//
// The package imports only the standard library, the root package and
// sessionlog.
package planmode
