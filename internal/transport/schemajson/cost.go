package schemajson

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Turning a record into JSON or back takes far more memory than either
// encoding's bytes: protojson goes through a dynamicpb message, where
// every element of a repeated field is a protoreflect.Value in a list and
// every message a map of its fields, and its output grows by copying.
// Measured (the whole allocation of protojson with dynamicpb, go1.26,
// amd64), one element at a time:
//
//	rendering an int64 of one wire byte      149 B   a large one    284 B
//	rendering an empty string                138 B   a string byte    2 B (33 B as \u00XX)
//	rendering an empty message               434 B
//	parsing "0," into an int64               129 B   "{}," into a message 431 B
//
// So a packed field of 8 MiB of small integers takes over a gigabyte to
// render. DecodeCost and EncodeCost estimate that memory, from above, in
// one pass over the bytes, so that a transport can hold it against the
// server's budget before it transcodes.
const (
	costToken   = 220  // a JSON value parsed, per '[' or ','
	costObject  = 600  // a JSON object parsed into a message, per '{'
	costAnyKey  = 2000 // an "@type" parsed: the Any's object is read twice and its record encoded
	costScalar  = 330  // a number or bool rendered
	costString  = 180  // a string or bytes value rendered, besides its bytes
	costMessage = 500  // a message rendered, besides its fields
	costAny     = 1000 // an Any rendered: its record decoded into a message first
	costChar    = 3    // a string byte rendered
	costEscaped = 33   // a string byte rendered as an escape
	costBase64  = 6    // a bytes byte rendered in base64
	costJSON    = 4    // a JSON byte parsed
	costDepth   = 100  // nesting past which the walk stops (protobuf's own limit)
)

// DecodeCost estimates the memory protojson takes to parse the JSON value
// js into a message: costJSON a byte, and a cost for each value it can
// hold (each '{', '[' and ',' outside strings, and each "@type").
func DecodeCost(js []byte) int64 {
	n := costJSON * int64(len(js))
	in := false
	for i := 0; i < len(js); i++ {
		c := js[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
			if bytes.HasPrefix(js[i:], anyKey) {
				n += costAnyKey
			}
		case '{':
			n += costObject
		case '[', ',':
			n += costToken
		}
	}
	return n
}

var anyKey = []byte(`"@type"`)

// EncodeCost estimates the memory protojson takes to render m, walking
// the records its google.protobuf.Any fields hold as r resolves them.
func (r *Resolver) EncodeCost(m proto.Message) int64 {
	w := costWalk{r: r}
	return w.msgCost(m.ProtoReflect(), 0)
}

// costWalk is one EncodeCost: the records of a response are mostly of one
// type, resolved once.
type costWalk struct {
	r   *Resolver
	url string
	md  protoreflect.MessageDescriptor // of url; nil: unknown
}

// resolve returns the descriptor of the type url names, nil if unknown.
func (w *costWalk) resolve(url string) protoreflect.MessageDescriptor {
	if url != w.url || w.md == nil {
		w.url, w.md = url, nil
		if mt, err := w.r.FindMessageByURL(url); err == nil {
			w.md = mt.Descriptor()
		}
	}
	return w.md
}

const anyName protoreflect.FullName = "google.protobuf.Any"

func (w *costWalk) msgCost(m protoreflect.Message, depth int) int64 {
	if m.Descriptor().FullName() == anyName {
		fs := m.Descriptor().Fields()
		return w.anyCost(m.Get(fs.ByNumber(1)).String(), m.Get(fs.ByNumber(2)).Bytes(), depth)
	}
	n := int64(costMessage)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				n += w.valueCost(fd, l.Get(i), depth)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				n += costString + int64(len(k.String())) + w.valueCost(fd.MapValue(), mv, depth)
				return true
			})
		default:
			n += w.valueCost(fd, v, depth)
		}
		return true
	})
	return n
}

func (w *costWalk) valueCost(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) int64 {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if depth >= costDepth {
			return costMessage
		}
		return w.msgCost(v.Message(), depth+1)
	case protoreflect.StringKind:
		return costString + stringCost(v.String())
	case protoreflect.BytesKind:
		return costString + costBase64*int64(len(v.Bytes()))
	}
	return costScalar
}

// anyCost is the cost of rendering an Any of type url holding value: its
// record's fields, or (a type r does not know, which protojson refuses)
// the bytes as they are.
func (w *costWalk) anyCost(url string, value []byte, depth int) int64 {
	n := int64(costMessage+costAny) + costString + int64(len(url))
	md := w.resolve(url)
	if md == nil || depth >= costDepth {
		return n + costBase64*int64(len(value))
	}
	return n + w.wireCost(value, md, depth+1)
}

// wireCost is the cost of rendering the message of descriptor md encoded
// in b, from its wire bytes: every field a protojson value, every element
// of a packed field one.
func (w *costWalk) wireCost(b []byte, md protoreflect.MessageDescriptor, depth int) int64 {
	n := int64(costMessage)
	var url string
	var value []byte
	isAny := md.FullName() == anyName
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return n + costScalar*int64(len(b)) // malformed: protojson refuses it
		}
		b = b[l:]
		if typ != protowire.BytesType {
			if l = protowire.ConsumeFieldValue(num, typ, b); l < 0 {
				return n + costScalar*int64(len(b))
			}
			n += costScalar
			if typ == protowire.StartGroupType {
				n += costScalar * int64(l) // any of its bytes may be an element
			}
			b = b[l:]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return n + costScalar*int64(len(b))
		}
		b = b[l:]
		if isAny {
			switch num {
			case 1:
				url = string(v)
			case 2:
				value = v
			}
			continue
		}
		n += w.bytesFieldCost(md.Fields().ByNumber(num), v, depth)
	}
	if isAny {
		return w.anyCost(url, value, depth)
	}
	return n
}

// bytesFieldCost is the cost of one length-delimited field, fd (nil when
// md has no such field, which protojson leaves out) holding v.
func (w *costWalk) bytesFieldCost(fd protoreflect.FieldDescriptor, v []byte, depth int) int64 {
	if fd == nil {
		return 0
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		// A map's entry too: a message of its key and value.
		if depth >= costDepth {
			return costMessage + costScalar*int64(len(v))
		}
		return w.wireCost(v, fd.Message(), depth+1)
	case protoreflect.StringKind:
		return costString + stringCost(v)
	case protoreflect.BytesKind:
		return costString + costBase64*int64(len(v))
	}
	return costScalar * packedCount(v, fd.Kind())
}

// stringCost is the cost of a string's bytes rendered: costChar each, and
// costEscaped more for each one JSON escapes (UTF-8 passes as it is).
func stringCost[S string | []byte](s S) int64 {
	var esc int64
	for i := range len(s) {
		esc += int64(escaped[s[i]])
	}
	return costChar*int64(len(s)) + costEscaped*esc
}

// escaped is 1 for the bytes JSON escapes in a string.
var escaped = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 1
	}
	t['"'], t['\\'], t[0x7f] = 1, 1, 1
	return t
}()

// packedCount is how many elements of kind k a packed field's bytes v hold.
func packedCount(v []byte, k protoreflect.Kind) int64 {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return max(1, int64(len(v))/4)
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return max(1, int64(len(v))/8)
	}
	var n int64
	for _, c := range v {
		if c < 0x80 {
			n++
		}
	}
	return max(1, n)
}
