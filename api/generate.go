// Package api holds the wire contract of the session store: the proto and its
// generated code (sessionpb), the gRPC services and the Go client (client).
//
// The generated *.pb.go files are committed; regenerate them (needs protoc 3.21,
// Debian's protobuf-compiler; the plugins come from go.mod's tool directives) with
//
//	go generate ./api/...
package api

//go:generate bash gen.sh
