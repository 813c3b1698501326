package engine

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
)

// jsonScalar converts the JSON value v of the key field kf into the
// scalar its key encodes, by protobuf's JSON rules for that field kind:
// integers as numbers or decimal strings, floats as numbers or strings
// (with "NaN", "Infinity", "-Infinity"), bools as true/false, strings as
// strings, bytes as base64 (standard or URL alphabet, padded or not), and
// enums as value names or numbers.
//
// It is what protojson.Unmarshal of {"field": v} followed by reading the
// field back would give, without building a message: a Get of many JSON
// keys pays for no marshalling.
func jsonScalar(kf schema.KeyField, v *structpb.Value) (record.Scalar, error) {
	fd := kf.Fields[len(kf.Fields)-1]
	s := record.Scalar{Kind: kf.Kind}
	var err error
	switch kf.Kind {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		s.Int, err = jsonInt(v, math.MinInt32, math.MaxInt32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s.Int, err = jsonInt(v, math.MinInt64, math.MaxInt64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s.Uint, err = jsonUint(v, math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.Uint, err = jsonUint(v, math.MaxUint64)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s.Float, err = jsonFloat(v, kf.Kind == protoreflect.FloatKind)
	case protoreflect.BoolKind:
		b, ok := v.GetKind().(*structpb.Value_BoolValue)
		if !ok {
			return s, errors.New("want true or false")
		}
		s.Bool = b.BoolValue
	case protoreflect.StringKind:
		str, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return s, errors.New("want a string")
		}
		s.Bytes = []byte(str.StringValue)
	case protoreflect.BytesKind:
		s.Bytes, err = jsonBytes(v)
	case protoreflect.EnumKind:
		s.Int, err = jsonEnum(fd.Enum(), v)
	default:
		return s, fmt.Errorf("a %v field cannot be a key", kf.Kind)
	}
	return s, err
}

// jsonInt reads an integer in [lo, hi] from a number or a decimal string
// (protojson also takes an exponent form, "1e3", when it is integral).
func jsonInt(v *structpb.Value, lo, hi int64) (int64, error) {
	switch x := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f := x.NumberValue
		if f != math.Trunc(f) {
			return 0, fmt.Errorf("%v is not an integer in [%d, %d]", f, lo, hi)
		}
		if math.Abs(f) >= exactDoubles {
			return decimalIntIn(numberText(f), lo, hi)
		}
		if f < float64(lo) || f > float64(hi) {
			return 0, fmt.Errorf("%v is not an integer in [%d, %d]", f, lo, hi)
		}
		return int64(f), nil
	case *structpb.Value_StringValue:
		return decimalIntIn(x.StringValue, lo, hi)
	}
	return 0, errors.New("want an integer (a number or a string of digits)")
}

// decimalIntIn reads s as decimalInt does, within [lo, hi].
func decimalIntIn(s string, lo, hi int64) (int64, error) {
	neg, mag, err := decimalInt(s)
	if err != nil {
		return 0, err
	}
	switch {
	case !neg && mag <= uint64(hi):
		return int64(mag), nil
	case neg && mag <= uint64(-(lo+1))+1:
		return int64(-mag), nil //nolint:gosec // -mag wraps to lo for mag = -lo
	}
	return 0, fmt.Errorf("%s is out of range [%d, %d]", s, lo, hi)
}

// exactDoubles bounds the integers a double holds one for one (2^53).
// Beyond it a number key is read as protojson reads the number's JSON
// text, the shortest decimal that rounds to the double, which is not
// always the double's exact value (1.0000000000000002e+17 is
// 100000000000000020; the double is 100000000000000016).
const exactDoubles = 1 << 53

// numberText is f as protojson writes a number.
func numberText(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// jsonUint reads an integer in [0, hi] from a number or a decimal string.
func jsonUint(v *structpb.Value, hi uint64) (uint64, error) {
	switch x := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f := x.NumberValue
		if f != math.Trunc(f) || f < 0 {
			return 0, fmt.Errorf("%v is not an integer in [0, %d]", f, hi)
		}
		if f >= exactDoubles {
			return decimalUintIn(numberText(f), hi)
		}
		if f > float64(hi) {
			return 0, fmt.Errorf("%v is not an integer in [0, %d]", f, hi)
		}
		return uint64(f), nil
	case *structpb.Value_StringValue:
		return decimalUintIn(x.StringValue, hi)
	}
	return 0, errors.New("want an unsigned integer (a number or a string of digits)")
}

// decimalUintIn reads s as decimalInt does, within [0, hi].
func decimalUintIn(s string, hi uint64) (uint64, error) {
	neg, mag, err := decimalInt(s)
	if err != nil {
		return 0, err
	}
	if (neg && mag != 0) || mag > hi {
		return 0, fmt.Errorf("%s is out of range [0, %d]", s, hi)
	}
	return mag, nil
}

// decimalInt reads an integer written as a JSON number inside a string
// ("12", "-3", "1e3", "1.50e1"), exactly, as protojson does: a fraction
// or exponent is fine when the value is whole. mag is the magnitude; a
// value beyond 64 bits is an error.
func decimalInt(s string) (neg bool, mag uint64, err error) {
	if !isJSONNumber(s) {
		return false, 0, fmt.Errorf("%q is not an integer", s)
	}
	neg = s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return neg, 0, nil // zero, whatever its exponent
	}
	e := 0
	if exp != "" {
		if e, err = strconv.Atoi(exp); err != nil {
			return neg, 0, fmt.Errorf("%q: exponent out of range", s)
		}
	}
	e -= len(frac)
	switch {
	case e < 0:
		if -e > len(digits) || strings.TrimRight(digits[len(digits)+e:], "0") != "" {
			return neg, 0, fmt.Errorf("%q is not a whole number", s)
		}
		digits = digits[:len(digits)+e]
	case len(digits)+e > 20:
		return neg, 0, fmt.Errorf("%q is out of range", s)
	default:
		digits += strings.Repeat("0", e)
	}
	if mag, err = strconv.ParseUint(digits, 10, 64); err != nil {
		return neg, 0, fmt.Errorf("%q is out of range", s)
	}
	return neg, mag, nil
}

// isJSONNumber reports whether s is a number by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - j
	}
	start := i
	if n := digits(); n == 0 || (n > 1 && s[start] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

func jsonFloat(v *structpb.Value, single bool) (float64, error) {
	var f float64
	switch x := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f = x.NumberValue
	case *structpb.Value_StringValue:
		switch x.StringValue {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		var err error
		if !isJSONNumber(x.StringValue) {
			return 0, fmt.Errorf("%q is not a number", x.StringValue)
		}
		if f, err = strconv.ParseFloat(x.StringValue, 64); err != nil {
			return 0, fmt.Errorf("%q is out of range", x.StringValue)
		}
	default:
		return 0, errors.New("want a number")
	}
	// A float takes what rounds to a finite float32, as protojson does.
	if single && !math.IsInf(f, 0) && math.IsInf(float64(float32(f)), 0) {
		return 0, fmt.Errorf("%v is out of range for a float", f)
	}
	return f, nil
}

func jsonBytes(v *structpb.Value) ([]byte, error) {
	x, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return nil, errors.New("want a base64 string")
	}
	s := x.StringValue
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	return b, nil
}

func jsonEnum(ed protoreflect.EnumDescriptor, v *structpb.Value) (int64, error) {
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		ev := ed.Values().ByName(protoreflect.Name(x.StringValue))
		if ev == nil {
			return 0, fmt.Errorf("no value %q in enum %s", x.StringValue, ed.FullName())
		}
		return int64(ev.Number()), nil
	case *structpb.Value_NumberValue:
		return jsonInt(v, math.MinInt32, math.MaxInt32)
	}
	return 0, fmt.Errorf("want a value name of enum %s or a number", ed.FullName())
}
