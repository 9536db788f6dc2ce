package sessionlog

import (
	"math"
	"strconv"
)

// numberLossless reports whether a JSON number text survives a JavaScript
// JSON.parse + JSON.stringify without changing value: it must be finite in
// float64, not negative zero, and equal (as a decimal) to the float64 it
// rounds to. 1.0, 0.1 and 1e2 pass; 1e400, -0 and 9007199254740993 do not.
func numberLossless(t []byte) bool {
	neg := t[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	j := i
	for j < len(t) && isDigit(t[j]) {
		j++
	}
	if j == len(t) && j-i <= 15 {
		// Fast path: every integer below 10^15 is exact in float64.
		return !(neg && j-i == 1 && t[i] == '0')
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil && !isRangeError(err) {
		return false
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	if f == 0 {
		// 0.0 and 0e5 stay 0; -0.0 becomes negative zero, 1e-400 becomes 0.
		return !neg && !hasNonZeroMantissa(t)
	}
	var buf [32]byte
	short := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	return sameDecimal(t, short)
}

func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func hasNonZeroMantissa(t []byte) bool {
	for _, c := range t {
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// decimal is a number text reduced to digits × 10^exp with no leading or
// trailing zero digits, so that equal values compare equal.
type decimal struct {
	neg    bool
	digits []byte
	exp    int64
}

func parseDecimal(t []byte, scratch []byte) decimal {
	d := decimal{digits: scratch[:0]}
	i := 0
	if i < len(t) && (t[i] == '-' || t[i] == '+') {
		d.neg = t[i] == '-'
		i++
	}
	var frac int64
	inFrac := false
	for ; i < len(t); i++ {
		c := t[i]
		if c == '.' {
			inFrac = true
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if len(d.digits) == 0 && c == '0' {
			if inFrac {
				frac++
			}
			continue
		}
		d.digits = append(d.digits, c)
		if inFrac {
			frac++
		}
	}
	var e int64
	if i < len(t) {
		i++
		eneg := false
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			eneg = t[i] == '-'
			i++
		}
		for ; i < len(t); i++ {
			if e < 1<<40 {
				e = e*10 + int64(t[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	n := len(d.digits)
	for n > 0 && d.digits[n-1] == '0' {
		n--
		e++
	}
	d.digits = d.digits[:n]
	d.exp = e - frac
	return d
}

func sameDecimal(a, b []byte) bool {
	var sa, sb [40]byte
	da := parseDecimal(a, sa[:])
	db := parseDecimal(b, sb[:])
	return da.neg == db.neg && da.exp == db.exp && string(da.digits) == string(db.digits)
}
