package natsjs

// EmptyJetStream is emptyJetStream for the package's external tests.
var EmptyJetStream = emptyJetStream
