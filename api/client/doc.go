// Package client is the Go client of the session store's SessionPersistence
// service (docs/api.md). It is used by agent hosts, the node's own subcommands,
// tests and the Jepsen helpers.
//
// # Nodes
//
// Dial and New make a client of one node (any node serves any call; a
// follower forwards writes to the leader). Open makes a client of several:
//
//	c, err := client.Open(ctx, client.Config{
//		Endpoints:   []string{"127.0.0.1:7410", "127.0.0.1:7420", "127.0.0.1:7430"},
//		DialOptions: []grpc.DialOption{grpc.WithPerRPCCredentials(client.BearerToken(token))},
//	})
//
// It learns the leader and the voters from the hints every answer carries
// (docs/api.md "Failover"), sends writes to the leader, and moves to another
// node on UNAVAILABLE, NO_LEADER, SHUTTING_DOWN or a lost connection, under
// the retry rules below. Configured endpoints win over the addresses the
// nodes hand out (see Open). KeepLease holds a lease (Prepare, then KeepAlive
// in a loop; its loss closes a channel and fences appends), and Follow is a
// Watch that resumes on another node from the next seq.
//
// # Requests
//
// Every method takes the rpc's request message from package sessionpb and
// returns the response with the stream forms assembled: LoadStream,
// InspectStream and PrepareStream return the whole SessionView, ReadFrom and
// ReadRaw collect every part, Watch returns a receive function. Load, Inspect
// and Prepare serve a session of any size: a view too large for one message
// (TOO_LARGE, which the server answers before committing anything) is read
// again with the stream form, with the same request.
//
// # Errors
//
// Every error the server returns carries a google.rpc.ErrorInfo (domain
// "sessionstore"). The client turns those into *sessionstore.Error (see
// FromStatus), so callers classify with errors.Is:
//
//	if errors.Is(err, sessionstore.ErrSeqMismatch) { ... }
//
// Errors without an ErrorInfo (transport failures, DEADLINE_EXCEEDED,
// CANCELLED, a broken stream) are returned as gRPC status errors: for a
// mutating call their outcome is unknown, exactly as OUTCOME_UNKNOWN is.
//
// # Retries
//
// The client follows docs/design.md "Retries and outcomes". Append and every rpc
// that carries a request_id (Create, Load, Prepare, KeepAlive, Release and the
// LoadStream/PrepareStream forms) are retried with the same request message,
// hence the same bytes and the same request id, on NO_LEADER, SHUTTING_DOWN and
// OUTCOME_UNKNOWN, and on UNAVAILABLE or DEADLINE_EXCEEDED without an ErrorInfo
// while the caller's context is alive. When the caller leaves request_id empty
// the client sends a copy of the message with a random 128-bit id (the
// caller's message is not modified, so reusing one message for several
// operations never makes the server deduplicate them into one); a caller who
// wants to resend a call itself after an unknown outcome sets request_id and
// resends the same message, which the server answers with its first response.
// Reads (Locate, Inspect, InspectStream, ReadFrom, ReadRaw, List,
// ListSnapshots) are retried only on NO_LEADER, SHUTTING_DOWN and UNAVAILABLE
// without an ErrorInfo. A definite error is never retried. Watch is never
// retried: resume from the last seen seq + 1, or use Follow, which does.
//
// Backoff is exponential from Options.InitialBackoff to Options.MaxBackoff with
// jitter, bounded by the context and Options.MaxAttempts. When the attempts or
// the context run out, the last attempt's error is returned (so an unknown
// outcome is reported as unknown, never as the context's error).
package client
