package fsm

// skipFencing makes Append ignore the lease epoch. Only the jepsenbug build
// tag sets it (jepsenbug_on.go): the jepsen harness builds that image to show
// its fencing checker catches a fenced writer that gets through. No real
// build ever includes it.
var skipFencing bool
