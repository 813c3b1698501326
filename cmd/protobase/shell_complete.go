package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/client"
)

// filterWords are the words of the filter syntax, completed beside fields.
var filterWords = []string{"and", "or", "not", "in", "prefix", "contains", "true", "false"}

// completer completes a shell line from the statements and the server's
// schema, fetched when first needed and again after a schema statement.
type completer struct {
	ctx    context.Context
	c      *client.Client
	addr   string
	types  []string            // record types' full names; nil: not fetched
	fields map[string][]string // a type's field paths, fetched on demand
}

func newCompleter(ctx context.Context, c *client.Client, addr string) *completer {
	return &completer{ctx: ctx, c: c, addr: addr}
}

// forget drops what was fetched: the schema may have changed.
func (cp *completer) forget() { cp.types, cp.fields = nil, nil }

// complete is liner's word completer: the word before pos, completed.
func (cp *completer) complete(line string, pos int) (head string, completions []string, tail string) {
	head, tail = line[:pos], line[pos:]
	start := strings.LastIndexAny(head, " \t(") + 1
	word := head[start:]
	head = head[:start]
	words := strings.Fields(head)
	var cands []string
	switch {
	case len(words) == 0:
		cands = shellStatements
	case words[0] == `\format` && len(words) == 1:
		cands = []string{"table", "json"}
	case len(words) == 1 && words[0] == "schema":
		cands = []string{"get", "apply"}
	case len(words) == 1 && !strings.HasPrefix(words[0], `\`):
		cands = cp.typeNames()
	case slices.Contains([]string{"search", "scan", "query", "count", "explain", "watch"}, words[0]) &&
		!strings.HasPrefix(words[1], "-"):
		cands = append(cp.fieldPaths(words[1]), filterWords...)
	}
	for _, c := range cands {
		if strings.HasPrefix(c, word) {
			completions = append(completions, c)
		}
	}
	// A statement or a type is followed by more; a field by an operator
	// or a dot, which the user types.
	if len(words) <= 1 && len(completions) == 1 {
		completions[0] += " "
	}
	return head, completions, tail
}

// typeNames returns the schema's record types.
func (cp *completer) typeNames() []string {
	if cp.types != nil {
		return cp.types
	}
	ctx, cancel := context.WithTimeout(cp.ctx, 5*time.Second)
	defer cancel()
	resp, err := cp.c.GetSchema(ctx)
	if err != nil {
		return nil
	}
	cp.types = []string{}
	for _, t := range resp.GetTypes() {
		cp.types = append(cp.types, t.GetName())
	}
	slices.Sort(cp.types)
	return cp.types
}

// fieldPaths returns typ's fields, those of its messages as dotted paths.
func (cp *completer) fieldPaths(typ string) []string {
	if p, ok := cp.fields[typ]; ok {
		return p
	}
	ctx, cancel := context.WithTimeout(cp.ctx, 5*time.Second)
	defer cancel()
	rt, err := loadRecordType(ctx, cp.c, cp.addr, typ)
	if err != nil {
		return nil
	}
	var paths []string
	var walk func(md protoreflect.MessageDescriptor, prefix string, depth int)
	walk = func(md protoreflect.MessageDescriptor, prefix string, depth int) {
		fds := md.Fields()
		for i := range fds.Len() {
			fd := fds.Get(i)
			path := prefix + string(fd.Name())
			paths = append(paths, path)
			// Three levels cover the paths people type, and end the
			// walk of a recursive message.
			if fd.Message() != nil && !fd.IsMap() && depth < 3 {
				walk(fd.Message(), path+".", depth+1)
			}
		}
	}
	walk(rt.md, "", 1)
	if cp.fields == nil {
		cp.fields = map[string][]string{}
	}
	cp.fields[typ] = paths
	return paths
}
