package main

// newRenderer builds the renderer from the runtime's settings. It returns a nil
// service while the renderer package is not wired in yet.
func newRenderer(rt *runtime) (service, error) {
	_ = rt
	return nil, nil
}
