package main

import (
	"context"
	"io"
)

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return benchMain(ctx, args, stdout, stderr)
}
