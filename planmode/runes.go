package planmode

import "unicode/utf8"

func decodeRune(s string) (rune, int)     { return utf8.DecodeRuneInString(s) }
func decodeLastRune(s string) (rune, int) { return utf8.DecodeLastRuneInString(s) }
