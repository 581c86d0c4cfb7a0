package system

import (
	"context"
	"errors"

	"github.com/jobgate/jobgate/internal/endpointcall"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// dispatcherWithEndpoints is the dispatcher component with the endpoint
// caller (docs/endpoints.md) beside it: the caller is a worker of the
// dispatcher's broker, so it starts after it and stops before it (its
// requests in flight finish, or their jobs are given back, while the
// broker still answers).
type dispatcherWithEndpoints struct {
	d  Service
	ec *endpointcall.Caller
}

func (s *System) withEndpointCaller(d Service, res *natsjs.Resources) (Service, error) {
	nc, err := s.OwnConn("endpoint-caller")
	if err != nil {
		return nil, err
	}
	m, err := s.metrics.NewEndpoints()
	if err != nil {
		return nil, err
	}
	cfg := endpointcall.Config{
		Conn: nc, Policy: s.settings.EndpointPolicy(), Metrics: m, Logger: s.log.With("service", "endpoint-caller"),
		PublicURL: s.publicURL(),
	}
	if s.adjustCaller != nil {
		s.adjustCaller(&cfg)
	}
	ec, err := endpointcall.New(cfg, endpointcall.Stores{Types: res.Types, Keys: res.Secrets, Slots: res.Slots, Secrets: res.Secrets})
	if err != nil {
		return nil, err
	}
	return &dispatcherWithEndpoints{d: d, ec: ec}, nil
}

func (c *dispatcherWithEndpoints) Start(ctx context.Context) error {
	if err := c.d.Start(ctx); err != nil {
		return err
	}
	if err := c.ec.Start(ctx); err != nil {
		_ = c.d.Stop(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

func (c *dispatcherWithEndpoints) Stop(ctx context.Context) error {
	return errors.Join(c.ec.Stop(ctx), c.d.Stop(ctx))
}

// publicURL is the gateway's base URL as endpoint handlers reach it, for
// their callbacks: JOBGATE_PUBLIC_URL, else this process's gateway (the
// port bound), else the configured listen address.
func (s *System) publicURL() string {
	if s.settings.PublicURL != "" {
		return s.settings.PublicURL
	}
	if s.listener != nil {
		return s.URL()
	}
	return "http://" + s.settings.HTTPAddr
}
