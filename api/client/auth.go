package client

import (
	"context"

	"google.golang.org/grpc/credentials"
)

// BearerToken returns per-call credentials that send the metadata
// "authorization: Bearer <token>" with every call. Use it with
// grpc.WithPerRPCCredentials in Dial's options:
//
//	c, err := client.Dial(ctx, addr,
//		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
//		grpc.WithPerRPCCredentials(client.BearerToken(token)))
//
// It does not require transport security (a node on loopback may be plaintext);
// over any other network use TLS, or the token travels in clear text.
func BearerToken(token string) credentials.PerRPCCredentials {
	return bearerToken(token)
}

type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }
