//go:build jepsenbug

package fsm

func init() { skipFencing = true }
