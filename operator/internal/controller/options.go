package controller

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// controllerOptions lets a second manager in the same process (tests that restart the
// operator) register a controller of the same name.
func controllerOptions() controller.Options {
	return controller.Options{SkipNameValidation: ptr.To(true)}
}
