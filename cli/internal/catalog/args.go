package catalog

// Small constructors keep each catalog entry to the facts that differ between tools.

func pathArg(name, desc string) Arg {
	return Arg{Name: name, Type: String, Description: desc, Required: true, In: InPath}
}

func query(name string, typ ArgType, desc string) Arg {
	return Arg{Name: name, Type: typ, Description: desc, In: InQuery}
}

func enumQuery(name, desc string, values ...string) Arg {
	return Arg{Name: name, Type: String, Description: desc, Enum: values, In: InQuery}
}

func requiredQuery(name, desc string) Arg {
	return Arg{Name: name, Type: String, Description: desc, Required: true, In: InQuery}
}

func body(name, desc string) Arg {
	return Arg{Name: name, Type: String, Description: desc, Required: true, In: InBody}
}

func optionalBody(name string, typ ArgType, desc string) Arg {
	return Arg{Name: name, Type: typ, Description: desc, In: InBody}
}

func enumBody(name, desc string, required bool, values ...string) Arg {
	return Arg{Name: name, Type: String, Description: desc, Required: required, Enum: values, In: InBody}
}

// taskArg and projectArg default to the pod's own Task and Project.
var (
	taskArg    = Arg{Name: "task", Type: String, Description: "Task name; defaults to your own task.", In: InPath, FromEnv: EnvTask}
	projectArg = Arg{Name: "project", Type: String, Description: "Project name; defaults to your project.", In: InPath, FromEnv: EnvProject}
	limitArg   = query("limit", Integer, "Maximum results (default 20).")
)
