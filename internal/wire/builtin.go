package wire

// builtinTypes are the job types jobgate's own workers declare: only
// jobgate's credential may declare them, and no count or byte budget of
// the type table can crowd them out.
var builtinTypes = map[string]bool{"permit_report": true}

// Builtin reports whether name is a built-in job type.
func Builtin(name string) bool { return builtinTypes[name] }
