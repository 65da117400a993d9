package suppress

import "errors"

// ErrNotE164 is a number that is not strictly E.164: + then 8 to 15
// digits, the first not 0.
var ErrNotE164 = errors.New("not an E.164 number: + then 8-15 digits, the first not 0")

// Key returns the number as a List keeps it in memory: its digits as one
// integer (15 digits fit in 50 bits). E.164's first digit is never 0, so
// two numbers never share a key.
func Key(number string) (uint64, error) {
	if len(number) < 9 || len(number) > 16 || number[0] != '+' || number[1] == '0' {
		return 0, ErrNotE164
	}
	var k uint64
	for i := 1; i < len(number); i++ {
		c := number[i]
		if c < '0' || c > '9' {
			return 0, ErrNotE164
		}
		k = k*10 + uint64(c-'0')
	}
	return k, nil
}
