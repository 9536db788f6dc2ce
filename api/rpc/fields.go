package rpc

import (
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sessionstore/sessionstore"
)

// Limits of the fields clients send (README "Configuration", field limits).
// Every string field of every request has one, so no client can make a node
// store, replicate or re-send an unbounded value; a new field without an
// entry fails TestEveryRequestFieldHasALimit.
const (
	MaxSessionIDBytes  = 1024 // session ids must also fit a 255-byte file name once encoded
	MaxRequestIDBytes  = 256
	MaxOwnerBytes      = 256
	MaxRevisionBytes   = 256
	MaxNodeIDBytes     = 256
	MaxCwdBytes        = 4096 // PATH_MAX
	MaxHeaderTextBytes = 1024 // parent_session, origin, agent_preset
	MaxPageTokenBytes  = 1024
	MaxPlanBytes       = 256 << 10
	MaxFeedbackBytes   = 64 << 10 // a review answer's custom text
	MaxAnswerItems     = 16       // items of a review answer, and selected labels of one item
	MaxAnswerTextBytes = 1024     // an answer item's id and each selected label
)

// fieldLimit bounds one field: the bytes of each string (0: bounded by the
// node's configured limits, which the cluster checks) and the entries of a
// repeated field (0: likewise).
type fieldLimit struct{ bytes, count int }

// fieldLimits is keyed by <message>.<field> of the request messages and the
// messages they hold.
var fieldLimits = map[string]fieldLimit{
	"SessionHeader.id":             {bytes: MaxSessionIDBytes},
	"SessionHeader.cwd":            {bytes: MaxCwdBytes},
	"SessionHeader.parent_session": {bytes: MaxHeaderTextBytes},
	"SessionHeader.origin":         {bytes: MaxHeaderTextBytes},
	"SessionHeader.agent_preset":   {bytes: MaxHeaderTextBytes},
	"Lease.session_id":             {bytes: MaxSessionIDBytes},
	"Lease.owner":                  {bytes: MaxOwnerBytes},

	"CreateRequest.request_id":             {bytes: MaxRequestIDBytes},
	"AppendRequest.session_id":             {bytes: MaxSessionIDBytes},
	"AppendRequest.events":                 {}, // --max-event-bytes, --max-batch-bytes, --max-batch-events
	"AppendRequest.expected_revision":      {bytes: MaxRevisionBytes},
	"LoadRequest.session_id":               {bytes: MaxSessionIDBytes},
	"LoadRequest.request_id":               {bytes: MaxRequestIDBytes},
	"InspectRequest.session_id":            {bytes: MaxSessionIDBytes},
	"PrepareRequest.session_id":            {bytes: MaxSessionIDBytes},
	"PrepareRequest.owner":                 {bytes: MaxOwnerBytes},
	"PrepareRequest.request_id":            {bytes: MaxRequestIDBytes},
	"KeepAliveRequest.request_id":          {bytes: MaxRequestIDBytes},
	"ReleaseRequest.session_id":            {bytes: MaxSessionIDBytes},
	"ReleaseRequest.request_id":            {bytes: MaxRequestIDBytes},
	"DeleteRequest.session_id":             {bytes: MaxSessionIDBytes},
	"DeleteRequest.expected_revision":      {bytes: MaxRevisionBytes},
	"DeleteRequest.request_id":             {bytes: MaxRequestIDBytes},
	"ReadFromRequest.session_id":           {bytes: MaxSessionIDBytes},
	"ReadRawRequest.session_id":            {bytes: MaxSessionIDBytes},
	"ListRequest.page_token":               {bytes: MaxPageTokenBytes},
	"ListRequest.cwd_prefix":               {bytes: MaxCwdBytes},
	"ListRequest.id_prefix":                {bytes: MaxSessionIDBytes},
	"ListSnapshotsRequest.page_token":      {bytes: MaxPageTokenBytes},
	"ListSnapshotsRequest.cwd_prefix":      {bytes: MaxCwdBytes},
	"ListSnapshotsRequest.id_prefix":       {bytes: MaxSessionIDBytes},
	"WatchRequest.session_id":              {bytes: MaxSessionIDBytes},
	"PlanGetRequest.session_id":            {bytes: MaxSessionIDBytes},
	"PlanSetRequest.session_id":            {bytes: MaxSessionIDBytes},
	"PlanSetRequest.request_id":            {bytes: MaxRequestIDBytes},
	"PlanPreStepRequest.session_id":        {bytes: MaxSessionIDBytes},
	"PlanPreStepRequest.request_id":        {bytes: MaxRequestIDBytes},
	"PlanCommandRequest.session_id":        {bytes: MaxSessionIDBytes},
	"PlanCommandRequest.raw_input":         {}, // --max-event-bytes / 2
	"PlanCommandRequest.image_blocks":      {}, // --max-batch-bytes with the input
	"PlanCommandRequest.request_id":        {bytes: MaxRequestIDBytes},
	"PlanExitRequest.session_id":           {bytes: MaxSessionIDBytes},
	"PlanExitRequest.plan":                 {bytes: MaxPlanBytes},
	"PlanExitRequest.request_id":           {bytes: MaxRequestIDBytes},
	"ReviewAnswer.answers":                 {count: MaxAnswerItems},
	"AnswerItem.id":                        {bytes: MaxAnswerTextBytes},
	"AnswerItem.selected":                  {bytes: MaxAnswerTextBytes, count: MaxAnswerItems},
	"AnswerItem.custom":                    {bytes: MaxFeedbackBytes},
	"PlanProjectionRequest.session_id":     {bytes: MaxSessionIDBytes},
	"TransferLeadershipRequest.to_node_id": {bytes: MaxNodeIDBytes},
	"RemoveMemberRequest.node_id":          {bytes: MaxNodeIDBytes},
}

// fieldLimitsByName is fieldLimits by message name, then field name: looked
// up with the descriptors' own names, so checking a request builds no string.
var fieldLimitsByName = func() map[protoreflect.Name]map[protoreflect.Name]fieldLimit {
	out := map[protoreflect.Name]map[protoreflect.Name]fieldLimit{}
	for key, lim := range fieldLimits {
		msg, field, _ := strings.Cut(key, ".")
		if out[protoreflect.Name(msg)] == nil {
			out[protoreflect.Name(msg)] = map[protoreflect.Name]fieldLimit{}
		}
		out[protoreflect.Name(msg)][protoreflect.Name(field)] = lim
	}
	return out
}()

// CheckFields refuses a request holding a field above its limit with
// TOO_LARGE naming the field and the limit. It runs before a handler sees
// the request, so nothing is proposed, forwarded or stored. Field names are
// only spelled out for the refusal: the check runs on every request, and a
// message with no limited field in it or below it is not walked at all (the
// cluster's own forwarding messages, which carry requests as bytes checked
// again when they are served).
func CheckFields(req proto.Message) error {
	return checkMessage(req.ProtoReflect(), nil)
}

// fieldPath names a field of a checked request (a list entry when i >= 0),
// below the field holding its message (parent; nil: the request itself).
type fieldPath struct {
	parent *fieldPath
	name   protoreflect.Name
	i      int
}

func (p *fieldPath) String() string {
	var prefix string
	if p.parent != nil {
		prefix = p.parent.String() + "."
	}
	if p.i < 0 {
		return prefix + string(p.name)
	}
	return fmt.Sprintf("%s%s[%d]", prefix, p.name, p.i)
}

// limitedMessages caches limited by message.
var limitedMessages sync.Map // protoreflect.FullName → bool

// limited reports whether a message of type md holds a field with a limit,
// itself or in a message it holds.
func limited(md protoreflect.MessageDescriptor) bool {
	if v, ok := limitedMessages.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := limitedWalk(md, map[protoreflect.FullName]bool{})
	limitedMessages.Store(md.FullName(), v)
	return v
}

// limitedWalk is limited without the cache; seen holds the messages on the
// way down (a message that holds itself adds no limit of its own again).
func limitedWalk(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if lim := fieldLimitsByName[md.Name()][fd.Name()]; lim.bytes > 0 || lim.count > 0 {
			return true
		}
		if m := fd.Message(); m != nil && limitedWalk(m, seen) {
			return true
		}
	}
	return false
}

func checkMessage(m protoreflect.Message, path *fieldPath) error {
	if !limited(m.Descriptor()) {
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		lim := fieldLimitsByName[fd.ContainingMessage().Name()][fd.Name()]
		nested := fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
		if !fd.IsList() {
			err = checkValue(fd, v, path, -1, lim)
			return err == nil
		}
		l := v.List()
		if lim.count > 0 && l.Len() > lim.count {
			err = sessionstore.Errorf(sessionstore.ReasonTooLarge, "request field %s holds %d entries; the limit is %d", &fieldPath{path, fd.Name(), -1}, l.Len(), lim.count)
			return false
		}
		if lim.bytes == 0 && !nested {
			return true // no entry can be too large
		}
		for i := 0; i < l.Len() && err == nil; i++ {
			err = checkValue(fd, l.Get(i), path, i, lim)
		}
		return err == nil
	})
	return err
}

// checkValue checks v, the value of fd (entry i of it; -1: not a list) in the
// message at path.
func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path *fieldPath, i int, lim fieldLimit) error {
	n := 0
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message(), &fieldPath{path, fd.Name(), i})
	case protoreflect.StringKind:
		n = len(v.String())
	case protoreflect.BytesKind:
		n = len(v.Bytes())
	}
	if lim.bytes > 0 && n > lim.bytes {
		return sessionstore.Errorf(sessionstore.ReasonTooLarge, "request field %s is %d bytes; the limit is %d", &fieldPath{path, fd.Name(), i}, n, lim.bytes)
	}
	return nil
}

// checkedStream checks each request message a streaming handler receives.
type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if pm, ok := m.(proto.Message); ok {
		return toStatus(CheckFields(pm))
	}
	return nil
}
