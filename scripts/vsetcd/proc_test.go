package main

import "testing"

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       uint64
		wantErr    bool
	}{
		{name: "plain", stat: "4242 (node) S 1 4242 4242 0 -1 4194560 1520 0 0 0 731 269 0 0 20 0 9 0 100 0 0\n", want: 1000},
		{name: "name with spaces and parens", stat: "7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1\n", want: 11},
		{name: "no closing paren", stat: "7 (node S 1 2 3", wantErr: true},
		{name: "truncated", stat: "7 (node) S 1 7 7 0 -1 0 0 0 0 0 5", wantErr: true},
		{name: "not a number", stat: "7 (node) S 1 7 7 0 -1 0 0 0 0 0 x 6 0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseStatCPU = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseIOWriteBytes(t *testing.T) {
	const io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n"
	for _, tc := range []struct {
		name, io string
		want     uint64
		wantErr  bool
	}{
		{name: "full", io: io, want: 81920},
		{name: "cancelled_write_bytes is not write_bytes", io: "cancelled_write_bytes: 5\n", wantErr: true},
		{name: "empty", io: "", wantErr: true},
		{name: "not a number", io: "write_bytes: many\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseIOWriteBytes(tc.io)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseIOWriteBytes = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
