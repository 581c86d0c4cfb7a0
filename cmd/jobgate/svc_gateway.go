package main

import (
	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
)

// newGateway builds the HTTP gateway. Only `serve` honours --dev (the
// page's /dev/token login); a standalone gateway never offers it.
func newGateway(rt *process, serve bool) (service, error) {
	secret, err := auth.LoadSecret(rt.cfg.AuthSecret, rt.cfg.DataDir, false)
	if err != nil {
		return nil, err
	}
	return gateway.New(gateway.Config{
		Addr:                     rt.cfg.HTTPAddr,
		Listener:                 rt.httpListener,
		AuthSecret:               secret,
		AuthAudience:             rt.cfg.AuthAudience,
		AuthIssuer:               rt.cfg.AuthIssuer,
		LinkTTL:                  rt.cfg.ResultLinkTTL,
		ReadRate:                 rt.cfg.Gateway.ReadRate,
		ReadBurst:                rt.cfg.Gateway.ReadBurst,
		SubmitRate:               rt.cfg.Gateway.SubmitRate,
		SubmitBurst:              rt.cfg.Gateway.SubmitBurst,
		LeaveWorkToRelay:         rt.cfg.Gateway.LeaveWorkToRelay,
		MaxStreamsPerRequester:   rt.cfg.Gateway.MaxStreamsPerRequester,
		MaxLongPollsPerRequester: rt.cfg.Gateway.MaxLongPollsPerRequester,
		StreamWriteTimeout:       rt.cfg.Gateway.StreamWriteTimeout,
		Dev:                      serve && rt.cfg.Dev,
		Failpoints:               rt.fp,
		Metrics:                  rt.metrics,
		MetricsToken:             rt.cfg.MetricsToken,
	}, rt.res, rt.log.With("component", "gateway"))
}
