package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"go.yaml.in/yaml/v3"
)

// runTypes is `jobgate types apply -f FILE` and `jobgate types
// rotate-secret NAME`: the operator's endpoint types (docs/endpoints.md),
// with an operator token (`jobgate token --operator --subject S`).
func (m *Main) runTypes(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &usageError{"jobgate types: apply -f FILE.yaml | rotate-secret NAME"}
	}
	switch args[0] {
	case "apply":
		return m.runTypesApply(ctx, args[1:])
	case "rotate-secret":
		return m.runTypesRotate(ctx, args[1:])
	}
	return &usageError{fmt.Sprintf("jobgate types: unknown subcommand %q (apply, rotate-secret)", args[0])}
}

// runTypesApply declares every endpoint type of a YAML file (one type per
// document, or a document with a `types:` list; each with its `name` and
// the members of PUT /v1/admin/types/{name}) and prints, one line a type,
// what that did: created (with the secret, shown this once), changed or
// unchanged. Running it again changes nothing.
func (m *Main) runTypesApply(ctx context.Context, args []string) error {
	fs := newFlagSet("types apply", m)
	cf := bindClientFlags(fs, 30*time.Second)
	file := fs.String("f", "", "the YAML file of the types (- for stdin)")
	if _, err := parseArgs(fs, args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if *file == "" {
		return &usageError{"jobgate types apply: -f FILE.yaml is required"}
	}
	data, err := m.readTypesFile(*file)
	if err != nil {
		return classify("types apply", err)
	}
	decls, err := parseTypes(data)
	if err != nil {
		return &clientError{code: exitInvalid, err: fmt.Errorf("types apply %s: %w", *file, err)}
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	for _, d := range decls {
		res, err := c.Admin().ApplyEndpointType(ctx, d.name, d.body)
		if err != nil {
			return classify("types apply "+d.name, err)
		}
		line := fmt.Sprintf("%s: %s", d.name, res.Outcome)
		if s := res.Type.Endpoint.Secret; s != "" {
			line += fmt.Sprintf(" (secret %s: store it with the handler now, it is not shown again)", s)
		} else if res.Retried {
			line += " (an earlier try's answer was lost; if it created the type, its secret is lost: `jobgate types rotate-secret " + d.name + "` makes a new one)"
		}
		fmt.Fprintln(m.Stdout, line)
	}
	return nil
}

// runTypesRotate prints a new signing secret of an endpoint type; the old
// one signs beside it for 24 hours.
func (m *Main) runTypesRotate(ctx context.Context, args []string) error {
	fs := newFlagSet("types rotate-secret", m)
	cf := bindClientFlags(fs, 30*time.Second)
	pos, err := parseArgs(fs, args, 1, 1, "one type name")
	if err != nil {
		return err
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	secret, err := c.Admin().RotateEndpointSecret(ctx, pos[0])
	if err != nil {
		return classify("types rotate-secret "+pos[0], err)
	}
	fmt.Fprintln(m.Stdout, secret)
	return nil
}

// maxTypesFile bounds the YAML file read.
const maxTypesFile = 4 << 20

func (m *Main) readTypesFile(path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		if m.Stdin == nil {
			return nil, errors.New("no standard input")
		}
		r = m.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxTypesFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTypesFile {
		return nil, fmt.Errorf("the file is larger than %d bytes", maxTypesFile)
	}
	return data, nil
}

// typeDoc is one type of the file: its name and the rest, sent as the
// body (members the server does not know are its to refuse, by name).
type typeDoc struct {
	name string
	body map[string]any
}

// parseTypes reads the YAML documents of a types file.
func parseTypes(data []byte) ([]typeDoc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []typeDoc
	seen := map[string]bool{}
	add := func(m map[string]any, where string) error {
		name, _ := m["name"].(string)
		if !job.ValidTypeName(name) {
			return fmt.Errorf("%s: name must match [a-z][a-z0-9_]{0,63}, got %v", where, m["name"])
		}
		if seen[name] {
			return fmt.Errorf("%s: type %s appears twice", where, name)
		}
		seen[name] = true
		body := make(map[string]any, len(m))
		for k, v := range m {
			if k != "name" {
				body[k] = v
			}
		}
		out = append(out, typeDoc{name: name, body: body})
		return nil
	}
	for n := 1; ; n++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if doc == nil {
			continue
		}
		list, isList := doc["types"]
		if !isList {
			if err := add(doc, fmt.Sprintf("document %d", n)); err != nil {
				return nil, err
			}
			continue
		}
		items, ok := list.([]any)
		if !ok || len(doc) != 1 {
			return nil, fmt.Errorf("document %d: types must be a list, alone in its document", n)
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("document %d, types[%d]: not a mapping", n, i)
			}
			if err := add(m, fmt.Sprintf("document %d, types[%d]", n, i)); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no type in the file")
	}
	return out, nil
}
