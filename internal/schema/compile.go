package schema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/ast"
	"github.com/bufbuild/protocompile/linker"
	"github.com/bufbuild/protocompile/parser"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/orderedcode"
	protosrc "github.com/protobase/protobase/proto"
)

// OptionsPath is the import path of the file declaring (protobase.v1.record).
const OptionsPath = "protobase/v1/options.proto"

// CompileError reports every problem found in a set of sources, each as
// "file:line:col: message" (or "file: message" when there is no position),
// sorted by file and position.
type CompileError struct {
	Errors []string
}

func (e *CompileError) Error() string { return strings.Join(e.Errors, "\n") }

// Compiled is a set of compiled sources. It is immutable.
type Compiled struct {
	// Files are the sources, by import path.
	Files map[string]string
	// UserFiles holds the user files, sorted by path.
	UserFiles []protoreflect.FileDescriptor
	// Registry holds every file the user files need, including the
	// well-known types and protobase/v1/options.proto.
	Registry *protoregistry.Files
	// Types are the record types found in the user files. Their ids are zero
	// and their index states unspecified: ids and states live in a State.
	Types map[protoreflect.FullName]*RecordType

	// ordered is every file of Registry, each after its imports.
	ordered []protoreflect.FileDescriptor
	// descriptors returns ordered as a serialized FileDescriptorSet,
	// computed once (see State.Encode).
	descriptors func() ([]byte, error)
	// encodedFiles returns encodeFiles(c), computed once.
	encodedFiles func() ([]byte, error)
}

// RecordType is a stored record type: a message carrying the record option.
// It is immutable.
type RecordType struct {
	// ID is the stable storage id, assigned by Plan and never reused.
	ID         uint32
	Name       protoreflect.FullName
	Desc       protoreflect.MessageDescriptor
	PrimaryKey []KeyField
	Indexes    []*Index
	// TTL is the record expiry, nil when records never expire.
	TTL *TTL
}

// KeyField is one field path of a primary or index key.
type KeyField struct {
	// Path is the dotted field path as written in the option ("address.zip").
	Path string
	// Fields are the fields along the path; the last one is the key field.
	Fields []protoreflect.FieldDescriptor
	// Kind is the kind of the last field: a scalar, string, bytes or enum.
	Kind protoreflect.Kind
	// Repeated is set when the last field is a repeated scalar (index keys
	// only): the index then has one entry per distinct element.
	Repeated bool
}

// KeyKind is the internal/orderedcode encoding of the field in primary and index
// keys: the one mapping from a protobuf kind to a key kind, which the
// planner (to build ranges) and the consistency checker (to split keys)
// share with the writer's encoding.
func (f KeyField) KeyKind() orderedcode.Kind {
	switch f.Kind {
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind,
		protoreflect.Fixed64Kind:
		return orderedcode.KindUint
	case protoreflect.BoolKind:
		return orderedcode.KindBool
	case protoreflect.FloatKind:
		return orderedcode.KindFloat32
	case protoreflect.DoubleKind:
		return orderedcode.KindFloat64
	case protoreflect.StringKind:
		return orderedcode.KindString
	case protoreflect.BytesKind:
		return orderedcode.KindBytes
	}
	return orderedcode.KindInt // the signed integers and enums
}

// Index is a secondary index of a record type. It is immutable.
type Index struct {
	// ID is the stable storage id, assigned by Plan and never reused.
	ID uint32
	// Type is the full name of the record type the index belongs to.
	Type   protoreflect.FullName
	Name   string
	Fields []KeyField
	Unique bool
	// State is BUILDING until the engine marks the index READY (or FAILED).
	State protobasev1.IndexState
	// Error says why the build failed, when State is FAILED.
	Error string
	// Aggregate marks an aggregate index (RecordOptions.aggregate): Fields
	// are its group_by fields, Sums the numeric fields it sums, and it
	// holds one entry per group instead of one per record.
	Aggregate bool
	Sums      []KeyField
	// Expiry marks the index a ttl option keeps: (expiry, primary key) of
	// every record, read by the reaper to find expired records without a
	// scan. Its name is ExpiryIndexName; it comes and goes with the ttl
	// option.
	Expiry bool
}

// ExpiryIndexName names the index a ttl option keeps. No user index can
// take it: an index name is letters, digits and underscores.
const ExpiryIndexName = "(ttl)"

// RepeatedField returns the position in Fields of the index's repeated
// field, or -1 when every field is singular. An index names at most one.
func (ix *Index) RepeatedField() int {
	for i, kf := range ix.Fields {
		if kf.Repeated {
			return i
		}
	}
	return -1
}

// Compile compiles every file in memory. Imports resolve among the given
// files, the well-known types (google/protobuf/*.proto),
// protobase/v1/options.proto and google/api/{annotations,http}.proto; a
// user file may not use one of those paths. Every problem is reported, as a
// *CompileError: syntax errors, unresolved imports, link errors and invalid
// record options. Sources over DefaultLimits are refused with a *LimitError
// before any is parsed.
func Compile(ctx context.Context, files map[string]string) (*Compiled, error) {
	if err := CheckLimits(files, DefaultLimits); err != nil {
		return nil, err
	}
	return compile(ctx, files)
}

// compile is Compile without the limits, for sources stored before them.
func compile(ctx context.Context, files map[string]string) (*Compiled, error) {
	bi, err := builtinFiles()
	if err != nil {
		return nil, err
	}
	var errs errorList
	names := sortedKeys(files)

	// Parse first, so that an unresolved import is reported for every file
	// (the compiler stops at the first one) and so that a file that cannot
	// be parsed does not hide the errors of the others.
	asts := make(map[string]*ast.FileNode, len(files))
	imports := make(map[string][]string, len(files))
	for _, name := range names {
		if msg := checkFileName(name, bi); msg != "" {
			errs.add(name, 0, 0, msg)
			continue
		}
		if line, col, ok := firstInvalidUTF8(files[name]); !ok {
			errs.add(name, line, col, "invalid UTF-8: a .proto file is UTF-8 text")
			continue
		}
		root, err := parse(name, files[name], reporter.NewHandler(errs.reporter()))
		if err != nil {
			var ewp reporter.ErrorWithPos
			if !errors.Is(err, reporter.ErrInvalidSource) && !errors.As(err, &ewp) {
				errs.add(name, 0, 0, err.Error())
			}
			continue
		}
		asts[name] = root
		for _, decl := range root.Decls {
			imp, ok := decl.(*ast.ImportNode)
			if !ok {
				continue
			}
			dep := imp.Name.AsString()
			imports[name] = append(imports[name], dep)
			if _, ok := files[dep]; ok || isBuiltin(dep, bi) {
				continue
			}
			pos := root.NodeInfo(imp.Name).Start()
			errs.add(name, pos.Line, pos.Col, fmt.Sprintf("import %q: no such file among the schema files, the well-known types and %s", dep, OptionsPath))
		}
	}
	ok, err := link(ctx, names, files, asts, imports, bi, &errs)
	if err != nil {
		return nil, err
	}
	user := make([]protoreflect.FileDescriptor, len(ok))
	for i, f := range ok {
		user[i] = f
	}
	types := findRecordTypes(user, &errs)
	if errs.len() > 0 {
		return nil, errs.compileError()
	}
	return newCompiled(files, user, types, dependencyOrder(user), nil)
}

// newCompiled assembles a Compiled and its registry. raw, when not nil, is
// the serialized FileDescriptorSet of ordered.
func newCompiled(files map[string]string, user []protoreflect.FileDescriptor, types map[protoreflect.FullName]*RecordType,
	ordered []protoreflect.FileDescriptor, raw []byte) (*Compiled, error) {
	c := &Compiled{
		Files:     make(map[string]string, len(files)),
		UserFiles: user,
		Registry:  new(protoregistry.Files),
		Types:     types,
		ordered:   ordered,
	}
	for k, v := range files {
		c.Files[k] = v
	}
	for _, fd := range c.ordered {
		if err := c.Registry.RegisterFile(fd); err != nil {
			return nil, &CompileError{Errors: []string{fmt.Sprintf("%s: %v", fd.Path(), err)}}
		}
	}
	c.descriptors = sync.OnceValues(func() ([]byte, error) {
		if raw != nil {
			return raw, nil
		}
		return marshalDescriptors(c.ordered, c.Files)
	})
	c.encodedFiles = sync.OnceValues(func() ([]byte, error) { return encodeFiles(c) })
	return c, nil
}

// parse parses one file. The protocompile v0.14.1 lexer can panic on some
// malformed string literals (found by FuzzCompile: "\"\\\x8a0"); the panic
// becomes an error of that file instead of taking the server down.
func parse(name, src string, h *reporter.Handler) (root *ast.FileNode, err error) {
	defer func() {
		if p := recover(); p != nil {
			root, err = nil, fmt.Errorf("the parser failed on this file (%v); look for a malformed string literal or invalid UTF-8", p)
		}
	}()
	return parser.Parse(name, strings.NewReader(src), h)
}

// firstInvalidUTF8 returns the 1-based position of the first byte of src
// that is not valid UTF-8, and false; or true when src is valid.
func firstInvalidUTF8(src string) (line, col int, ok bool) {
	if utf8.ValidString(src) {
		return 0, 0, true
	}
	line, col = 1, 1
	for i, r := range src {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(src[i:]); size <= 1 {
				return line, col, false
			}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col, false
}

// emptyCompiled is the compiled form of no files at all.
func emptyCompiled() *Compiled {
	c := &Compiled{
		Files:       map[string]string{},
		Registry:    new(protoregistry.Files),
		Types:       map[protoreflect.FullName]*RecordType{},
		descriptors: func() ([]byte, error) { return nil, nil },
	}
	c.encodedFiles = func() ([]byte, error) { return encodeFiles(c) }
	return c
}

func notFound(string) (protocompile.SearchResult, error) {
	return protocompile.SearchResult{}, protoregistry.NotFound
}

// checkFileName returns why name cannot be the path of a user file, or "".
func checkFileName(name string, bi map[string]linker.File) string {
	switch {
	case name == "":
		return "empty file name"
	case !strings.HasSuffix(name, ".proto"):
		return "file name must end in .proto"
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") ||
		path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../"):
		return "file name must be a clean relative path (like \"shop/users.proto\")"
	case isBuiltin(name, bi):
		return "file name is reserved: the file is built in"
	}
	return ""
}

// isBuiltin reports whether p is served by the compiler itself.
func isBuiltin(p string, bi map[string]linker.File) bool {
	if _, ok := bi[p]; ok {
		return true
	}
	_, err := protocompile.WithStandardImports(protocompile.ResolverFunc(notFound)).FindFileByPath(p)
	return err == nil
}

// builtinFiles compiles the embedded protobase/v1/options.proto and
// google/api/*.proto (and nothing else of protosrc.FS) once; compiled descriptors are immutable and shared by
// every compilation.
var builtinFiles = sync.OnceValues(func() (map[string]linker.File, error) {
	srcs := map[string]string{}
	err := fs.WalkDir(protosrc.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p != OptionsPath && (!strings.HasPrefix(p, "google/api/") || !strings.HasSuffix(p, ".proto")) {
			return nil // the API itself is not importable by schemas
		}
		b, err := fs.ReadFile(protosrc.FS, p)
		srcs[p] = string(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("schema: read embedded protos: %w", err)
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(srcs),
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	linked, err := comp.Compile(context.Background(), sortedKeys(srcs)...)
	if err != nil {
		return nil, fmt.Errorf("schema: compile embedded protos: %w", err)
	}
	out := make(map[string]linker.File, len(linked))
	for _, f := range linked {
		out[f.Path()] = f
	}
	if _, ok := out[OptionsPath]; !ok {
		return nil, fmt.Errorf("schema: %s is not embedded", OptionsPath)
	}
	return out, nil
})

// dependencyOrder lists the files and all their imports, each file after its
// imports, user files visited in path order. Files are unwrapped from the
// linker's wrappers and deduplicated by path.
func dependencyOrder(files []protoreflect.FileDescriptor) []protoreflect.FileDescriptor {
	var out []protoreflect.FileDescriptor
	seen := map[string]bool{}
	var visit func(fd protoreflect.FileDescriptor)
	visit = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imps := fd.Imports()
		for i := 0; i < imps.Len(); i++ {
			if imp := imps.Get(i).FileDescriptor; imp != nil && !imp.IsPlaceholder() {
				visit(imp)
			}
		}
		if u, ok := fd.(interface {
			Unwrap() protoreflect.FileDescriptor
		}); ok {
			fd = u.Unwrap()
		}
		out = append(out, fd)
	}
	sorted := append([]protoreflect.FileDescriptor(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path() < sorted[j].Path() })
	for _, f := range sorted {
		visit(f)
	}
	return out
}

// errorList collects positioned errors from any goroutine.
type errorList struct {
	mu   sync.Mutex
	errs []posError
}

type posError struct {
	file      string
	line, col int
	msg       string
}

func (p posError) String() string {
	switch {
	case p.file == "":
		return p.msg
	case p.line <= 0:
		return fmt.Sprintf("%s: %s", p.file, p.msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", p.file, p.line, p.col, p.msg)
	}
}

func (l *errorList) add(file string, line, col int, msg string) {
	file = strings.ToValidUTF8(file, "\uFFFD") // messages end up in gRPC statuses
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, posError{file, line, col, msg})
}

func (l *errorList) addPos(e reporter.ErrorWithPos) {
	pos := e.GetPosition()
	msg := e.Error()
	if u := e.Unwrap(); u != nil {
		msg = u.Error()
	}
	l.add(pos.Filename, pos.Line, pos.Col, msg)
}

func (l *errorList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs)
}

// reporter returns a protocompile reporter that records every error and
// lets the compilation continue, so that all of them are reported.
func (l *errorList) reporter() reporter.Reporter {
	return reporter.NewReporter(func(e reporter.ErrorWithPos) error {
		l.addPos(e)
		return nil
	}, nil)
}

func (l *errorList) compileError() *CompileError {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := append([]posError(nil), l.errs...)
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if a.file != b.file {
			return a.file < b.file
		}
		if a.line != b.line {
			return a.line < b.line
		}
		if a.col != b.col {
			return a.col < b.col
		}
		return a.msg < b.msg
	})
	out := &CompileError{}
	for i, e := range errs {
		if i > 0 && e == errs[i-1] {
			continue
		}
		out.Errors = append(out.Errors, e.String())
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
