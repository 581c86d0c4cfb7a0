package main

// newDispatcher builds the dispatcher from the runtime's settings. It returns a nil
// service while the dispatcher package is not wired in yet.
func newDispatcher(rt *runtime) (service, error) {
	_ = rt
	return nil, nil
}
