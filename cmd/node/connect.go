package main

import (
	"fmt"
	"mime"
	"net/http"

	"connectrpc.com/vanguard"
	"google.golang.org/grpc"

	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// connectServices are the services the HTTP port also serves with the
// Connect protocol (docs/api.md "HTTP/JSON (Connect)"). Health, reflection
// and the nodes' forwarding stream stay gRPC only.
var connectServices = []string{
	pb.SessionPersistence_ServiceDesc.ServiceName,
	pb.PlanMode_ServiceDesc.ServiceName,
	pb.Cluster_ServiceDesc.ServiceName,
}

// connectContentTypes are the media types of the Connect protocol: unary
// calls (application/json, application/proto) and streams (enveloped).
var connectContentTypes = map[string]bool{
	"application/json":          true,
	"application/proto":         true,
	"application/connect+json":  true,
	"application/connect+proto": true,
}

// newConnectHandler serves the three services with the Connect protocol by
// transcoding each call (vanguard) into a gRPC call handled in memory by gs
// itself: the same interceptors (request ids, field limits, authentication,
// permissions, rate and stream caps, metrics) and the same error statuses
// as a call on the gRPC port. maxMessageBytes is the gRPC message limit; the
// JSON form of a message may be up to about twice its protobuf size (quoted
// JSON text, base64 bytes), so that is what the transcoder may buffer.
func newConnectHandler(gs *grpc.Server, maxMessageBytes int) (http.Handler, error) {
	svcs := make([]*vanguard.Service, 0, len(connectServices))
	for _, name := range connectServices {
		svcs = append(svcs, vanguard.NewService(name, gs))
	}
	buffer := uint64(2*maxMessageBytes) + 64<<10
	tc, err := vanguard.NewTranscoder(svcs, vanguard.WithDefaultServiceOptions(
		vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
		vanguard.WithTargetCodecs(vanguard.CodecProto),
		vanguard.WithMaxMessageBufferBytes(uint32(min(buffer, 1<<32-1))),
	))
	if err != nil {
		return nil, fmt.Errorf("connect transcoder: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The transcoder would also take gRPC-Web (and gRPC over HTTP/2);
		// only the Connect protocol is promised and tested here, and gRPC
		// has its own port.
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if !connectContentTypes[mt] {
			w.Header().Set("Accept-Post", "application/json, application/proto, application/connect+json, application/connect+proto")
			http.Error(w, "the HTTP port speaks the Connect protocol: POST with Content-Type application/json (unary) or application/connect+json (server streams); gRPC is served on the gRPC port", http.StatusUnsupportedMediaType)
			return
		}
		// The Connect spec lets a unary call leave out its protocol version
		// header (curl); the transcoder needs it to tell Connect from REST,
		// and this port has no REST routes.
		if r.Header.Get("Connect-Protocol-Version") == "" && (mt == "application/json" || mt == "application/proto") {
			r.Header.Set("Connect-Protocol-Version", "1")
		}
		tc.ServeHTTP(w, r)
	}), nil
}
