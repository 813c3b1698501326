package schema

import (
	"context"
	"errors"
	"sort"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/ast"
	"github.com/bufbuild/protocompile/linker"
	"github.com/bufbuild/protocompile/reporter"
)

// link compiles the parsed user files in dependency order and returns those
// that linked, sorted by path; every problem goes to errs.
//
// One protocompile call over all files costs time quadratic in the length
// of an import chain or worse (its import-cycle check walks the chain of
// files each one waits on: 3,000 chained files took 3.7 s). Here the files
// are sorted into levels, each file one level above its deepest import, and
// each level is one call that sees the levels below it as linked
// descriptors, sharing one symbol table so that name collisions across
// levels are still found. Files in an import cycle, or importing one, never
// get a level; they are compiled together at the end, where protocompile
// reports the cycle.
//
// A file compiles only when it parsed and every user file it imports
// linked; the others would only repeat errors already reported.
func link(ctx context.Context, names []string, files map[string]string, asts map[string]*ast.FileNode,
	imports map[string][]string, bi map[string]linker.File, errs *errorList) (linker.Files, error) {
	levels, rest := importLevels(names, files, asts, imports, bi)
	l := &leveledLinker{
		files:   files,
		imports: imports,
		errs:    errs,
		linked:  make(map[string]linker.File, len(asts)),
		failed:  map[string]bool{},
	}
	std := protocompile.WithStandardImports(protocompile.ResolverFunc(notFound))
	l.comp = protocompile.Compiler{
		Resolver: protocompile.ResolverFunc(func(p string) (protocompile.SearchResult, error) {
			if f, ok := l.linked[p]; ok {
				return protocompile.SearchResult{Desc: f}, nil
			}
			if root, ok := asts[p]; ok && !l.failed[p] {
				return protocompile.SearchResult{AST: root}, nil
			}
			if f, ok := bi[p]; ok {
				return protocompile.SearchResult{Desc: f}, nil
			}
			return std.FindFileByPath(p)
		}),
		Reporter:       errs.reporter(),
		SourceInfoMode: protocompile.SourceInfoStandard,
		Symbols:        &linker.Symbols{},
	}
	if len(rest) > 0 {
		levels = append(levels, rest)
	}
	for _, level := range levels {
		if err := l.run(ctx, level); err != nil {
			return nil, err
		}
	}
	ok := make(linker.Files, 0, len(l.linked))
	for _, f := range l.linked {
		ok = append(ok, f)
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].Path() < ok[j].Path() })
	return ok, nil
}

// leveledLinker compiles batches of files, each seeing the files linked
// by earlier batches. It is used by one goroutine; protocompile calls its
// resolver from several while one batch compiles, and only reads.
type leveledLinker struct {
	files   map[string]string
	imports map[string][]string
	errs    *errorList
	comp    protocompile.Compiler
	// linked and failed hold the outcome of the files of earlier batches.
	linked map[string]linker.File
	failed map[string]bool
}

// run compiles one batch, skipping a file whose user import failed.
func (l *leveledLinker) run(ctx context.Context, batch []string) error {
	inBatch := make(map[string]bool, len(batch))
	for _, name := range batch {
		inBatch[name] = true
	}
	todo := batch[:0:0]
	for _, name := range batch {
		bad := false
		for _, dep := range l.imports[name] {
			if _, user := l.files[dep]; user && l.linked[dep] == nil && !inBatch[dep] {
				bad = true
			}
		}
		if bad {
			l.failed[name] = true
			continue
		}
		todo = append(todo, name)
	}
	if len(todo) == 0 {
		return nil
	}
	out, err := l.comp.Compile(ctx, todo...)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil && !errors.Is(err, reporter.ErrInvalidSource) {
		var ewp reporter.ErrorWithPos
		if errors.As(err, &ewp) {
			l.errs.addPos(ewp)
		} else {
			l.errs.add("", 0, 0, err.Error()) // such as a recovered panic
		}
	}
	for i, name := range todo {
		if i < len(out) && out[i] != nil {
			l.linked[name] = out[i]
		} else {
			l.failed[name] = true
		}
	}
	return nil
}

// importLevels sorts the files that parsed and whose imports all exist
// (user files that parsed, or built-in files) into levels: level 0 imports
// no user file, level k+1 imports files of level k at most. Files in an
// import cycle, or importing one, are returned in rest, in path order.
// It takes time linear in the files and imports (Kahn's algorithm).
func importLevels(names []string, files map[string]string, asts map[string]*ast.FileNode,
	imports map[string][]string, bi map[string]linker.File) (levels [][]string, rest []string) {
	pending := map[string]int{} // user imports not yet placed
	dependents := map[string][]string{}
	bad := map[string]bool{}
	level := map[string]int{}
	var queue []string
	for _, name := range names {
		if asts[name] == nil {
			bad[name] = true
			continue
		}
		seen := map[string]bool{}
		for _, dep := range imports[name] {
			if _, user := files[dep]; !user {
				if !isBuiltin(dep, bi) {
					bad[name] = true
				}
				continue
			}
			if !seen[dep] {
				seen[dep] = true
				pending[name]++
				dependents[dep] = append(dependents[dep], name)
			}
		}
		if pending[name] == 0 {
			queue = append(queue, name)
		}
	}
	placed := map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		placed[name] = true
		if !bad[name] {
			for len(levels) <= level[name] {
				levels = append(levels, nil)
			}
			levels[level[name]] = append(levels[level[name]], name)
		}
		for _, d := range dependents[name] {
			if bad[name] || asts[name] == nil {
				bad[d] = true
			}
			if level[name]+1 > level[d] {
				level[d] = level[name] + 1
			}
			if pending[d]--; pending[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	for _, name := range names {
		if !placed[name] && !bad[name] {
			rest = append(rest, name)
		}
	}
	for _, l := range levels {
		sort.Strings(l)
	}
	return levels, rest
}
