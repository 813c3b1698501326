package schema

import (
	"crypto/sha256"
	"fmt"
	"sort"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// marshalDescriptors serializes the user files among ordered, each after
// the user files it imports, as a FileDescriptorSet. The built-in files
// (well-known types, protobase/v1/options.proto) are left out: they are
// part of the binary. Deterministic: the same files give the same bytes.
func marshalDescriptors(ordered []protoreflect.FileDescriptor, files map[string]string) ([]byte, error) {
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range ordered {
		if _, user := files[fd.Path()]; user {
			set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("marshal compiled schema: %w", err)
	}
	return b, nil
}

// sourcesDigest identifies a set of sources, so that descriptors stored
// with them are used only for the very sources they were compiled from.
func sourcesDigest(files map[string]string) []byte {
	h := sha256.New()
	for _, name := range sortedKeys(files) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(files[name]), files[name])
	}
	return h.Sum(nil)
}

// compiledFromDescriptors rebuilds what Compile made of files from the
// descriptors of marshalDescriptors (raw), without parsing or linking: at
// 3,000 files this takes a fraction of a compile.
func compiledFromDescriptors(files map[string]string, raw []byte) (*Compiled, error) {
	bi, err := builtinFiles()
	if err != nil {
		return nil, err
	}
	set := new(descriptorpb.FileDescriptorSet)
	if err := proto.Unmarshal(raw, set); err != nil {
		return nil, fmt.Errorf("read compiled schema: %w", err)
	}
	if len(set.File) != len(files) {
		return nil, fmt.Errorf("read compiled schema: %d files, %d sources", len(set.File), len(files))
	}
	std := protocompile.WithStandardImports(protocompile.ResolverFunc(notFound))
	user := new(protoregistry.Files)
	builtin := new(protoregistry.Files) // the built-in files imported so far
	res := &fileResolver{user: user, builtin: builtin, find: func(path string) protoreflect.FileDescriptor {
		if f, ok := bi[path]; ok {
			return f
		}
		if r, err := std.FindFileByPath(path); err == nil && r.Desc != nil {
			return r.Desc
		}
		return nil
	}}
	deps := res
	fds := make([]protoreflect.FileDescriptor, 0, len(set.File))
	for _, fp := range set.File {
		if _, ok := files[fp.GetName()]; !ok {
			return nil, fmt.Errorf("read compiled schema: %q is not a stored file", fp.GetName())
		}
		fd, err := protodesc.NewFile(fp, deps)
		if err != nil {
			return nil, fmt.Errorf("read compiled schema: %w", err)
		}
		if err := user.RegisterFile(fd); err != nil {
			return nil, fmt.Errorf("read compiled schema: %w", err)
		}
		fds = append(fds, fd)
	}
	sort.Slice(fds, func(i, j int) bool { return fds[i].Path() < fds[j].Path() })
	var errs errorList
	types := findRecordTypes(fds, &errs)
	if errs.len() > 0 {
		return nil, fmt.Errorf("read compiled schema: %w", errs.compileError())
	}
	return newCompiled(files, fds, types, dependencyOrder(fds), raw)
}

// fileResolver resolves the imports of stored user files, and the names
// they use, among the user files already loaded and the built-in files.
type fileResolver struct {
	user, builtin *protoregistry.Files
	// find returns the built-in file at a path, or nil.
	find func(path string) protoreflect.FileDescriptor
}

func (r *fileResolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.user.FindFileByPath(path); err == nil {
		return fd, nil
	}
	if fd, err := r.builtin.FindFileByPath(path); err == nil {
		return fd, nil
	}
	fd := r.find(path)
	if fd == nil {
		return nil, fmt.Errorf("import %q: %w", path, protoregistry.NotFound)
	}
	if err := r.register(fd); err != nil {
		return nil, err
	}
	return fd, nil
}

// register adds a built-in file and its imports to r.builtin, so that the
// names they declare resolve.
func (r *fileResolver) register(fd protoreflect.FileDescriptor) error {
	if _, err := r.builtin.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	if u, ok := fd.(interface {
		Unwrap() protoreflect.FileDescriptor
	}); ok {
		fd = u.Unwrap()
	}
	if err := r.builtin.RegisterFile(fd); err != nil {
		return fmt.Errorf("register %s: %w", fd.Path(), err)
	}
	imps := fd.Imports()
	for i := 0; i < imps.Len(); i++ {
		if imp := imps.Get(i).FileDescriptor; imp != nil && !imp.IsPlaceholder() {
			if err := r.register(imp); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *fileResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.user.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return r.builtin.FindDescriptorByName(name)
}

// usedDescriptorSet returns the user files among ordered (files names
// them) and, of the files they import, those whose declarations a user
// file uses (as a field, extension or method type), with everything those
// import; each after its imports. An import used only for options, such
// as protobase/v1/options.proto (and so descriptor.proto, 41 KB of it), is
// left out and dropped from the importing file's dependencies: options
// decode as unknown fields without it, and the record options are in
// GetSchema's types already. A Go client that links gen/protobase/v1
// still reads them as extensions.
func usedDescriptorSet(ordered []protoreflect.FileDescriptor, files map[string]string) *descriptorpb.FileDescriptorSet {
	keep := make(map[string]bool, len(files))
	for path := range files {
		keep[path] = true
	}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if keep[fd.Path()] {
			return
		}
		keep[fd.Path()] = true
		imps := fd.Imports()
		for i := range imps.Len() {
			add(imps.Get(i).FileDescriptor)
		}
	}
	for _, fd := range ordered {
		if _, user := files[fd.Path()]; !user {
			continue
		}
		used := map[string]bool{}
		usedFiles(fd.Messages(), fd.Extensions(), used)
		svcs := fd.Services()
		for i := range svcs.Len() {
			ms := svcs.Get(i).Methods()
			for j := range ms.Len() {
				used[ms.Get(j).Input().ParentFile().Path()] = true
				used[ms.Get(j).Output().ParentFile().Path()] = true
			}
		}
		imps := fd.Imports()
		for i := range imps.Len() {
			if imp := imps.Get(i).FileDescriptor; provides(imp, used) {
				add(imp)
			}
		}
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range ordered {
		if !keep[fd.Path()] {
			continue
		}
		fp := protodesc.ToFileDescriptorProto(fd)
		if _, user := files[fd.Path()]; user {
			dropDependencies(fp, keep)
		}
		set.File = append(set.File, fp)
	}
	return set
}

// usedFiles adds to used the files declaring the message and enum types
// that msgs and exts (at any depth) refer to.
func usedFiles(msgs protoreflect.MessageDescriptors, exts protoreflect.ExtensionDescriptors, used map[string]bool) {
	field := func(f protoreflect.FieldDescriptor) {
		if m := f.Message(); m != nil {
			used[m.ParentFile().Path()] = true
		}
		if e := f.Enum(); e != nil {
			used[e.ParentFile().Path()] = true
		}
	}
	for i := range exts.Len() {
		x := exts.Get(i)
		used[x.ContainingMessage().ParentFile().Path()] = true
		field(x)
	}
	for i := range msgs.Len() {
		m := msgs.Get(i)
		fs := m.Fields()
		for j := range fs.Len() {
			field(fs.Get(j))
		}
		usedFiles(m.Messages(), m.Extensions(), used)
	}
}

// provides reports whether fd, or a file it imports publicly, is in used:
// the import through which a used declaration is visible.
func provides(fd protoreflect.FileDescriptor, used map[string]bool) bool {
	if used[fd.Path()] {
		return true
	}
	imps := fd.Imports()
	for i := range imps.Len() {
		if imp := imps.Get(i); imp.IsPublic && provides(imp.FileDescriptor, used) {
			return true
		}
	}
	return false
}

// dropDependencies removes from fp the dependencies not in keep,
// renumbering the public and weak ones.
func dropDependencies(fp *descriptorpb.FileDescriptorProto, keep map[string]bool) {
	renum := make(map[int32]int32, len(fp.Dependency))
	var deps []string
	for i, d := range fp.Dependency {
		if keep[d] {
			renum[int32(i)] = int32(len(deps))
			deps = append(deps, d)
		}
	}
	if len(deps) == len(fp.Dependency) {
		return
	}
	remap := func(idx []int32) []int32 {
		var out []int32
		for _, i := range idx {
			if j, ok := renum[i]; ok {
				out = append(out, j)
			}
		}
		return out
	}
	fp.Dependency = deps
	fp.PublicDependency = remap(fp.PublicDependency)
	fp.WeakDependency = remap(fp.WeakDependency)
}
