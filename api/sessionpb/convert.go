package sessionpb

import "github.com/sessionstore/sessionstore"

// Hand-written conversions between the wire header and the domain header,
// shared by the services, the client-side tools and their tests.

// HeaderFromDomain converts a domain header for the wire. Version and
// DelegationDepth are int32 on the wire; callers that accept headers from
// outside the store check that they fit first.
func HeaderFromDomain(h sessionstore.Header) *SessionHeader {
	out := &SessionHeader{Version: int32(h.Version), Id: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin, AgentPreset: h.AgentPreset}
	if h.DelegationDepth != nil {
		d := int32(*h.DelegationDepth)
		out.DelegationDepth = &d
	}
	return out
}

// Domain converts a wire header to the domain type (nil: the zero header).
func (h *SessionHeader) Domain() sessionstore.Header {
	if h == nil {
		return sessionstore.Header{}
	}
	out := sessionstore.Header{Version: int64(h.Version), ID: h.Id, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin, AgentPreset: h.AgentPreset}
	if h.DelegationDepth != nil {
		d := int64(*h.DelegationDepth)
		out.DelegationDepth = &d
	}
	return out
}
