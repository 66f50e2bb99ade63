package taskops

// For the external tests of subtaskrule_test.go, which also read rest's authorization table.
var (
	SubtaskPolicy        = subtaskPolicy
	SubtaskRuleException = subtaskRuleException
)
