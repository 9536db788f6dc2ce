package sessionlog

// The texts of the synthetic tool results (docs/events.md#crash-repair), byte for byte.
const (
	textOutcomeUnknown = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
	textNotStarted     = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)

// pendingCall is one assistant tool-call block still waiting for its result.
type pendingCall struct {
	id      *value
	step    *value
	callSeq *value // seq of the matching tool/call; nil when not recorded
	removed bool
}

// repairScan is the fold of docs/events.md#crash-repair step 1 over a log. Values are kept as JSON
// values because the reference copies them into the closers as they are
// (a turn/start without a turn gives closers without one).
type repairScan struct {
	turnOpen bool
	turn     *value
	stepOpen bool
	step     *value
	calls    []pendingCall
	byKey    map[string]int
	objects  int
}

// callKey gives the identity of a call id as a JavaScript Map key
// (SameValueZero): primitives by value, objects never equal to another.
func (r *repairScan) callKey(v *value) string {
	if v == nil {
		return "u"
	}
	switch v.k {
	case kNull:
		return "n"
	case kTrue:
		return "t"
	case kFalse:
		return "f"
	case kNumber:
		return "#" + jsNumber(v.n)
	case kString:
		return "s" + v.s
	default:
		r.objects++
		return "o" + itoa(r.objects)
	}
}

func (r *repairScan) clear() {
	r.calls = r.calls[:0]
	clear(r.byKey)
}

// register sets pending[id] = {step}; a re-registered id keeps its place
// in the order but loses a recorded callSeq, as Map.set does.
func (r *repairScan) register(id, step *value) {
	k := r.callKey(id)
	if i, ok := r.byKey[k]; ok {
		r.calls[i].step, r.calls[i].callSeq = step, nil
		return
	}
	r.byKey[k] = len(r.calls)
	r.calls = append(r.calls, pendingCall{id: id, step: step})
}

func (r *repairScan) scan(evs []*storedEvent) error {
	for _, e := range evs {
		if err := r.add(e); err != nil {
			return err
		}
	}
	return nil
}

// add folds one event into the scan.
func (r *repairScan) add(e *storedEvent) error {
	if r.byKey == nil {
		r.byKey = map[string]int{}
	}
	typ, ok := e.typeName()
	if !ok {
		return nil
	}
	switch typ {
	case "turn/start":
		turn, err := jsGet(e.get("data"), "turn")
		if err != nil {
			return err
		}
		r.turnOpen, r.turn = !turn.isNull(), turn
		r.stepOpen, r.step = false, nil
		r.clear()
	case "turn/end":
		r.turnOpen, r.turn = false, nil
		r.stepOpen, r.step = false, nil
		r.clear()
	case "step/start":
		step, err := jsGet(e.get("data"), "step")
		if err != nil {
			return err
		}
		r.stepOpen, r.step = !step.isNull(), step
	case "step/end":
		r.clear()
		r.stepOpen, r.step = false, nil
	case "assistant/message":
		data := e.get("data")
		message, err := jsGet(data, "message")
		if err != nil {
			return err
		}
		content, err := jsGet(message, "content")
		if err != nil {
			return err
		}
		if content == nil || (content.k != kArray && content.k != kString) {
			return storedErr("assistant/message at seq %s: message content is not iterable", seqText(e))
		}
		for _, block := range content.arr { // a string iterates characters, none a tool-call
			t, err := jsGet(block, "type")
			if err != nil {
				return err
			}
			if t.strEq("tool-call") {
				id, _ := jsGet(block, "id")
				step, err := jsGet(data, "step")
				if err != nil {
					return err
				}
				r.register(id, step)
			}
		}
	case "tool/call":
		callID, err := jsGet(e.get("data"), "callId")
		if err != nil {
			return err
		}
		if callID != nil && (callID.k == kObject || callID.k == kArray) {
			return nil // an object key matches no registered call
		}
		if i, ok := r.byKey[r.callKey(callID)]; ok {
			r.calls[i].callSeq = e.get("seq")
		}
	case "tool/result":
		message, err := jsGet(e.get("data"), "message")
		if err != nil {
			return err
		}
		source, err := jsGet(message, "source")
		if err != nil {
			return err
		}
		callID, err := jsGet(source, "callId")
		if err != nil {
			return err
		}
		if callID != nil && (callID.k == kObject || callID.k == kArray) {
			return nil
		}
		k := r.callKey(callID)
		if i, ok := r.byKey[k]; ok {
			r.calls[i].removed = true
			delete(r.byKey, k)
		}
	}
	return nil
}

// Closers computes the crash-repair closers of docs/events.md#crash-repair from a normalised
// log: a TOOL_OUTCOME_UNKNOWN or TOOL_NOT_STARTED tool/result per pending
// call (in registration order), a step/end when a step is open, and the
// turn/end {interrupted}. Seqs continue the log, every closer reuses the last
// event's time, and the bytes are JSON.stringify of the reference's objects
// (keys type, seq, time, data, surfaceOp, sourceEventSeqs?). It returns nil
// for a balanced or empty log.
func Closers(normalized [][]byte) ([][]byte, error) {
	evs, err := parseLog(normalized)
	if err != nil {
		return nil, err
	}
	var r repairScan
	open, err := r.run(evs)
	if err != nil || !open {
		return nil, err
	}
	return r.closers(evs[len(evs)-1]), nil
}

// closers builds the closers of an open turn after the last event.
func (r *repairScan) closers(last *storedEvent) [][]byte {
	seq := last.get("seq").n + 1
	time := last.get("time")
	var out [][]byte
	closer := func(typ string, data *value, extra ...member) {
		ms := []member{jsMem("type", jsStr(typ)), jsMem("seq", jsNum(seq)), jsMem("time", time), jsMem("data", data)}
		out = append(out, appendJSON(nil, jsObj(append(ms, extra...)...)))
		seq++
	}
	for _, c := range r.calls {
		if c.removed {
			continue
		}
		started := c.callSeq != nil
		text, errName, errCode := textNotStarted, "ToolNotStartedError", "TOOL_NOT_STARTED"
		if started {
			text, errName, errCode = textOutcomeUnknown, "ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN"
		}
		message := jsObj(
			jsMem("id", jsStr("interrupted-tool-result-"+jsString(c.id)+"-"+jsNumber(seq))),
			jsMem("role", jsStr("user")),
			jsMem("source", jsObj(jsMem("kind", jsStr("tool")), jsMem("callId", c.id))),
			jsMem("content", jsArr(jsObj(
				jsMem("type", jsStr("tool-result")),
				jsMem("toolCallId", c.id),
				jsMem("isError", jsTrue),
				jsMem("content", jsArr(jsObj(jsMem("type", jsStr("text")), jsMem("text", jsStr(text))))),
			))),
		)
		data := jsObj(
			jsMem("turn", r.turn),
			jsMem("step", c.step),
			jsMem("message", message),
			jsMem("error", jsObj(jsMem("name", jsStr(errName)), jsMem("code", jsStr(errCode)))),
		)
		extra := []member{jsMem("surfaceOp", jsStr("append"))}
		if started {
			extra = append(extra, jsMem("sourceEventSeqs", jsArr(c.callSeq)))
		}
		closer("tool/result", data, extra...)
	}
	if r.stepOpen {
		closer("step/end", jsObj(jsMem("turn", r.turn), jsMem("step", r.step)))
	}
	closer("turn/end", jsObj(jsMem("turn", r.turn), jsMem("reason", jsObj(jsMem("kind", jsStr("interrupted"))))))
	return out
}

// OpenTurn reports whether a normalised log ends inside a turn, that is,
// whether Closers would return anything.
func OpenTurn(normalized [][]byte) (bool, error) {
	evs, err := parseLog(normalized)
	if err != nil {
		return false, err
	}
	var r repairScan
	return r.run(evs)
}

// run scans the log and reports whether a turn is left open. An open turn
// needs the last event's seq to number its closers.
func (r *repairScan) run(evs []*storedEvent) (bool, error) {
	if err := r.scan(evs); err != nil {
		return false, err
	}
	if len(evs) == 0 {
		return false, nil
	}
	return r.open(evs[len(evs)-1])
}

// open reports whether the scan ends inside a turn, last being the last event.
func (r *repairScan) open(last *storedEvent) (bool, error) {
	if !r.turnOpen {
		return false, nil
	}
	if seq := last.get("seq"); seq == nil || seq.k != kNumber {
		return false, storedErr("cannot close the open turn: the last event has no numeric seq")
	}
	return true, nil
}
