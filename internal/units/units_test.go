package units

import "testing"

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {32 << 10, "32.0 KiB"}, {16 << 20, "16.0 MiB"},
		{(16 << 20) - (512 << 10), "15.5 MiB"}, {1 << 30, "1.0 GiB"}, {5 << 50, "5.0 PiB"}, {-2048, "-2.0 KiB"},
	} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
