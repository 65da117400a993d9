package wire

// AllDigits reports whether every byte of s is an ASCII digit; the empty
// string is all digits.
func AllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
