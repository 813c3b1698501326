package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// printer writes records as JSON lines or as a table, with their versions
// when asked: a JSON line is then {"version":"N","record":{...}} (the
// version a string, as protobuf JSON writes 64-bit integers, and as watch
// prints positions), and the table's first column is "version".
type printer struct {
	w        io.Writer
	table    *tabwriter.Writer
	md       protoreflect.MessageDescriptor
	header   bool
	versions bool
	json     protojson.MarshalOptions
}

func newPrinter(w io.Writer, format string, md protoreflect.MessageDescriptor, versions bool) *printer {
	p := &printer{w: w, md: md, versions: versions}
	if format == "table" {
		p.table = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

// noVersions is the error of an answer that asked for versions and holds
// none for some records: a server of a release before versions ignores
// the request.
func noVersions(addr string, versions, records int) error {
	return fmt.Errorf("the server at %s answered %d versions for %d records (a server of a release before record versions sends none)",
		addr, versions, records)
}

// print writes one record, at version ver when the printer shows versions.
func (p *printer) print(a *anypb.Any, ver uint64) error {
	if p.table == nil {
		b, err := p.jsonOf(a)
		if err != nil {
			return err
		}
		if p.versions {
			_, err = fmt.Fprintf(p.w, "{\"version\":\"%d\",\"record\":%s}\n", ver, b)
		} else {
			_, err = fmt.Fprintf(p.w, "%s\n", b)
		}
		return err
	}
	m, err := p.decode(a)
	if err != nil {
		return err
	}
	fields := p.md.Fields()
	var cells []string
	if !p.header {
		p.header = true
		if p.versions {
			cells = append(cells, "version")
		}
		for i := 0; i < fields.Len(); i++ {
			cells = append(cells, string(fields.Get(i).Name()))
		}
		fmt.Fprintln(p.table, strings.Join(cells, "\t"))
		cells = cells[:0]
	}
	if p.versions {
		cells = append(cells, strconv.FormatUint(ver, 10))
	}
	for i := 0; i < fields.Len(); i++ {
		cells = append(cells, p.cell(m, fields.Get(i)))
	}
	_, err = fmt.Fprintln(p.table, strings.Join(cells, "\t"))
	return err
}

// decode decodes a record of the printer's type.
func (p *printer) decode(a *anypb.Any) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(p.md)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("decode a record of %s: %w", p.md.FullName(), err)
	}
	return m, nil
}

// jsonOf renders a record as the jsonl format prints it.
func (p *printer) jsonOf(a *anypb.Any) ([]byte, error) {
	m, err := p.decode(a)
	if err != nil {
		return nil, err
	}
	return stableJSON(p.json, m, "")
}

// cell renders one field: scalars plainly, anything else as compact JSON.
func (p *printer) cell(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) string {
	if !m.Has(fd) && fd.Kind() != protoreflect.MessageKind && !fd.IsList() {
		v := fd.Default()
		return scalarText(fd, v)
	}
	if fd.IsList() || fd.IsMap() || fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		b, _ := stableJSON(p.json, fieldOnly(m, fd), "")
		s := string(b)
		// {"name":value} → value
		if i := strings.IndexByte(s, ':'); i > 0 && strings.HasSuffix(s, "}") {
			s = s[i+1 : len(s)-1]
		} else {
			s = ""
		}
		return s
	}
	return scalarText(fd, m.Get(fd))
}

func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return fmt.Sprint(int32(v.Enum()))
	case protoreflect.BytesKind:
		return fmt.Sprintf("%x", v.Bytes())
	}
	return v.String()
}

// fieldOnly returns a message holding only fd of m.
func fieldOnly(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) *dynamicpb.Message {
	n := dynamicpb.NewMessage(m.Descriptor())
	if m.Has(fd) {
		n.Set(fd, m.Get(fd))
	}
	return n
}

func (p *printer) flush() {
	if p.table != nil {
		p.table.Flush()
	}
}
