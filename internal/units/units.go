// Package units renders quantities for people (logs, progress, errors).
package units

import "fmt"

// Bytes renders a byte count in binary units with one decimal ("512 B",
// "32.0 KiB", "16.0 MiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; (v >= unit || v <= -unit) && exp < 4; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
